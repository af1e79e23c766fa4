// The unpackers of gemm_unpack.h, portable C++ (every tier and architecture): the prefill
// GEMM unpacks a task's chunk of weight rows once and reuses it for every activation panel,
// so this runs once per weight per GEMM call. Layouts as in each format's <type>.cpp.
#include "quant/gemm_unpack.h"

#include "quant/block_layouts.h"
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

// bias of one scale group of n codes: the w . 128 that the VNNI kernels' unsigned x + 128 adds.
int32_t group_bias(const int8_t* q, int n) {
  int32_t s = 0;
  for (int j = 0; j < n; ++j) s += q[j];
  return 128 * s;
}

// A 32-element block of 4- or 5-bit codes: weight j < 16 is the low nibble of qs[j], weight
// j + 16 its high nibble; the fifth bit of weight j is bit j of qh (hi5), minus sub (Q5_0: 16).
void nibbles32(const uint8_t* qs, bool hi5, uint32_t qh, int sub, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    const int h0 = hi5 ? static_cast<int>(((qh >> j) << 4) & 0x10) : 0;
    const int h1 = hi5 ? static_cast<int>((qh >> (j + 12)) & 0x10) : 0;
    q[j] = static_cast<int8_t>(((qs[j] & 0x0F) | h0) - sub);
    q[j + 16] = static_cast<int8_t>(((qs[j] >> 4) | h1) - sub);
  }
}

void unpack_q4_1(const uint8_t* p, int64_t n, int8_t* q, float* dw, int32_t* bias, float* off) {
  for (int64_t b = 0; b < n; ++b, p += Q4_1Layout::kBlockBytes, q += 32) {
    nibbles32(p + 4, false, 0, 0, q);
    dw[b] = load_half(p);
    off[b] = load_half(p + 2);
    bias[b] = group_bias(q, 32);
  }
}

void unpack_q5_0(const uint8_t* p, int64_t n, int8_t* q, float* dw, int32_t* bias, float*) {
  for (int64_t b = 0; b < n; ++b, p += Q5_0Layout::kBlockBytes, q += 32) {
    nibbles32(p + 6, true, load_u32(p + 2), 16, q);
    dw[b] = load_half(p);
    bias[b] = group_bias(q, 32);
  }
}

void unpack_q5_1(const uint8_t* p, int64_t n, int8_t* q, float* dw, int32_t* bias, float* off) {
  for (int64_t b = 0; b < n; ++b, p += Q5_1Layout::kBlockBytes, q += 32) {
    nibbles32(p + 8, true, load_u32(p + 4), 0, q);
    dw[b] = load_half(p);
    off[b] = load_half(p + 2);
    bias[b] = group_bias(q, 32);
  }
}

// Q4_K (144 bytes: d, dmin, scales[12], qs[128]) and Q5_K (176: d, dmin, scales[12], qh[32],
// qs[128]); sub-block j takes the low (even j) or high nibbles of qs[32 * (j / 2) ..], and
// Q5_K its fifth bit from bit j of qh[l]; w = (d * sc) * code - dmin * m.
template <bool kQ5>
void unpack_k4(const uint8_t* p, int64_t n, int8_t* q, float* dw, int32_t* bias, float* off) {
  constexpr size_t kBytes = kQ5 ? 176 : 144;
  for (int64_t b = 0; b < n; ++b, p += kBytes) {
    const float d = load_half(p), dmin = load_half(p + 2);
    const uint8_t* qh = p + 16;
    const uint8_t* qs = p + (kQ5 ? 48 : 16);
    // sub-blocks 2k (low nibbles) and 2k + 1 (high) of one 32-byte run, in branch-free loops
    // the compiler vectorizes (this runs once per weight per GEMM call)
    for (int k = 0; k < 4; ++k, q += 64) {
      const uint8_t* v = qs + 32 * k;
      int32_t s0 = 0, s1 = 0;
      for (int l = 0; l < 32; ++l) {
        int c0 = v[l] & 0x0F, c1 = v[l] >> 4;
        if constexpr (kQ5) {
          c0 |= ((qh[l] >> (2 * k)) & 1) << 4;
          c1 |= ((qh[l] >> (2 * k + 1)) & 1) << 4;
        }
        q[l] = static_cast<int8_t>(c0);
        q[32 + l] = static_cast<int8_t>(c1);
        s0 += c0;
        s1 += c1;
      }
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * k + h;
        uint8_t sc, m;
        unpack_scale_min_k4(j, p + 4, &sc, &m);
        dw[8 * b + j] = d * sc;
        off[8 * b + j] = -(dmin * m);
        bias[8 * b + j] = 128 * (h ? s1 : s0);
      }
    }
  }
}

// Q6_K (210 bytes: ql[128], qh[64], scales[16] int8, d): 32 weights l of quarter k of half h
// have code ((ql[l + 32 (k & 1)] >> 4 (k / 2)) & 15 | ((qh[l] >> 2k) & 3) << 4) - 32 and the
// scales sc[8h + 2k] (l < 16) and sc[8h + 2k + 1]: two groups per 32.
void unpack_q6_k(const uint8_t* p, int64_t n, int8_t* q, float* dw, int32_t* bias, float*) {
  for (int64_t b = 0; b < n; ++b, p += 210) {
    const float d = load_half(p + 208);
    const auto* sc = reinterpret_cast<const int8_t*>(p + 192);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = p + 64 * h;
      const uint8_t* qh = p + 128 + 32 * h;
      for (int k = 0; k < 4; ++k, q += 32) {
        for (int l = 0; l < 32; ++l) {
          const int lo = (ql[l + 32 * (k & 1)] >> (4 * (k / 2))) & 0x0F;
          const int hi = (qh[l] >> (2 * k)) & 3;
          q[l] = static_cast<int8_t>((lo | (hi << 4)) - 32);
        }
        const int64_t g = 16 * b + 8 * h + 2 * k;  // scale groups so far
        dw[g] = d * static_cast<float>(sc[8 * h + 2 * k]);
        dw[g + 1] = d * static_cast<float>(sc[8 * h + 2 * k + 1]);
        bias[g] = group_bias(q, 16);
        bias[g + 1] = group_bias(q + 16, 16);
      }
    }
  }
}

constexpr GemmUnpackFormat kQ4_1{32, Q4_1Layout::kBlockBytes, false, true, true, unpack_q4_1};
constexpr GemmUnpackFormat kQ5_0{32, Q5_0Layout::kBlockBytes, false, false, false, unpack_q5_0};
constexpr GemmUnpackFormat kQ5_1{32, Q5_1Layout::kBlockBytes, false, true, true, unpack_q5_1};
constexpr GemmUnpackFormat kQ4_K{256, 144, false, true, true, unpack_k4<false>};
constexpr GemmUnpackFormat kQ5_K{256, 176, false, true, true, unpack_k4<true>};
constexpr GemmUnpackFormat kQ6_K{256, 210, true, false, false, unpack_q6_k};

}  // namespace

const GemmUnpackFormat* find_gemm_unpack(GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_1: return &kQ4_1;
    case GgmlType::kQ5_0: return &kQ5_0;
    case GgmlType::kQ5_1: return &kQ5_1;
    case GgmlType::kQ4_K: return &kQ4_K;
    case GgmlType::kQ5_K: return &kQ5_K;
    case GgmlType::kQ6_K: return &kQ6_K;
    default: return nullptr;
  }
}

}  // namespace vlkv::quant
