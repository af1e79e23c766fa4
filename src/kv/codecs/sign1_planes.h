// Bit-plane kernels shared by the 1-bit / 2-bit per-channel codecs (sign1c, mixk).
// A plane is the G bits of one channel (or spectrum coefficient) over the G tokens
// of a block: [G/8] bytes, bit t of plane j = (planes[j * G/8 + t/8] >> (t % 8)) & 1.
// Scores and accumulate over such codes reduce to two weighted plane sums:
//   plane_scores: acc[t] += sum_j w[j] * bit_j(t)       (one weight per plane)
//   plane_sums:   u[j]    = sum_t p[t] * bit_j(t)       (one weight per token)
// Scalar reference, AVX2 (byte -> lane mask table) and AVX-512 (mask registers,
// test-into-mask) paths, chosen per call by simd_level(). Internal to codecs/.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "base/cpu_features.h"
#include "base/fp16.h"

namespace vlkv::sign1 {

// Block fields are byte-packed (no alignment): read and write halves through memcpy.
inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}
inline void store_f16(uint8_t* p, float x) {
  const float lim = 65504.0f;  // clamp instead of overflowing to inf
  const uint16_t h = fp32_to_fp16(x > lim ? lim : x < -lim ? -lim : x);
  std::memcpy(p, &h, 2);
}
// The value a stored half reads back as.
inline float round_f16(float x) {
  uint8_t b[2];
  store_f16(b, x);
  return load_f16(b);
}

// out[0, n) = the n byte-packed halves at p (exact at every level; F16C when available).
__attribute__((target("avx2,fma,f16c"))) inline void load_f16_row_f16c(const uint8_t* p, int n, float* out) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i))));
  for (; i < n; ++i) out[i] = load_f16(p + 2 * i);
}
inline void load_f16_row(const uint8_t* p, int n, float* out) {
  if (simd_level() != SimdLevel::kScalar) return load_f16_row_f16c(p, n, out);
  for (int i = 0; i < n; ++i) out[i] = load_f16(p + 2 * i);
}

inline bool plane_bit(const uint8_t* planes, int group, int j, int t) {
  return (planes[static_cast<int64_t>(j) * (group / 8) + t / 8] >> (t % 8)) & 1;
}

// ---------------- scalar reference ----------------
inline void plane_scores_scalar(const uint8_t* planes, int n_planes, int group, const float* w, float* acc) {
  for (int t = 0; t < group; ++t) {
    float s = 0.0f;
    for (int j = 0; j < n_planes; ++j)
      if (plane_bit(planes, group, j, t)) s += w[j];
    acc[t] += s;
  }
}

// lg[r * ld + t] = scale * (base[r] + sum_j w[r * n_planes + j] * bit_j(t)), r < n_rows.
inline void plane_scores_rows_scalar(const uint8_t* planes, int n_planes, int group, const float* w,
                                     const float* base, int n_rows, float scale, float* lg, int64_t ld) {
  for (int r = 0; r < n_rows; ++r)
    for (int t = 0; t < group; ++t) {
      float s = base[r];
      for (int j = 0; j < n_planes; ++j)
        if (plane_bit(planes, group, j, t)) s += w[static_cast<int64_t>(r) * n_planes + j];
      lg[r * ld + t] = s * scale;
    }
}

inline void plane_sums_scalar(const uint8_t* planes, int n_planes, int group, const float* p, float* u) {
  for (int j = 0; j < n_planes; ++j) {
    float s = 0.0f;
    for (int t = 0; t < group; ++t)
      if (plane_bit(planes, group, j, t)) s += p[t];
    u[j] = s;
  }
}

// ---------------- AVX2 ----------------
#define VLKV_S1_AVX2 __attribute__((target("avx2,fma,f16c")))

// kByteLanes[b][i] = all ones iff bit i of b is set.
struct ByteLaneTable {
  alignas(32) uint32_t m[256][8];
  ByteLaneTable() {
    for (int b = 0; b < 256; ++b)
      for (int i = 0; i < 8; ++i) m[b][i] = ((b >> i) & 1) ? 0xffffffffu : 0u;
  }
};
inline const ByteLaneTable& byte_lanes() {
  static const ByteLaneTable t;
  return t;
}

VLKV_S1_AVX2 inline void plane_scores_avx2(const uint8_t* planes, int n_planes, int group, const float* w,
                                           float* acc) {
  const int stride = group / 8;
  const auto& lut = byte_lanes().m;
  for (int s = 0; s < stride; ++s) {  // 8 tokens per slab
    const uint8_t* pb = planes + s;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int j = 0;
    for (; j + 4 <= n_planes; j += 4) {
      const uint8_t* p = pb + static_cast<int64_t>(j) * stride;
      a0 = _mm256_add_ps(a0, _mm256_and_ps(_mm256_load_ps(reinterpret_cast<const float*>(lut[p[0]])), _mm256_broadcast_ss(w + j)));
      a1 = _mm256_add_ps(a1, _mm256_and_ps(_mm256_load_ps(reinterpret_cast<const float*>(lut[p[stride]])), _mm256_broadcast_ss(w + j + 1)));
      a2 = _mm256_add_ps(a2, _mm256_and_ps(_mm256_load_ps(reinterpret_cast<const float*>(lut[p[2 * stride]])), _mm256_broadcast_ss(w + j + 2)));
      a3 = _mm256_add_ps(a3, _mm256_and_ps(_mm256_load_ps(reinterpret_cast<const float*>(lut[p[3 * stride]])), _mm256_broadcast_ss(w + j + 3)));
    }
    for (; j < n_planes; ++j)
      a0 = _mm256_add_ps(a0, _mm256_and_ps(_mm256_load_ps(reinterpret_cast<const float*>(lut[pb[static_cast<int64_t>(j) * stride]])),
                                           _mm256_broadcast_ss(w + j)));
    const __m256 sum = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    _mm256_storeu_ps(acc + 8 * s, _mm256_add_ps(_mm256_loadu_ps(acc + 8 * s), sum));
  }
}

// Bits [t0, t0 + 32) of plane j as a word (fewer bytes at the end of the group).
inline uint32_t plane_word(const uint8_t* planes, int group, int j, int t0) {
  const int stride = group / 8, nb = stride - t0 / 8 < 4 ? stride - t0 / 8 : 4;
  const uint8_t* src = planes + static_cast<int64_t>(j) * stride + t0 / 8;
  uint32_t w = 0;
  if (nb == 4) {
    std::memcpy(&w, src, 4);  // fixed size: one load, no library call
  } else {
    for (int i = 0; i < nb; ++i) w |= static_cast<uint32_t>(src[i]) << (8 * i);
  }
  return w;
}

VLKV_S1_AVX2 inline void plane_sums_avx2(const uint8_t* planes, int n_planes, int group, const float* p, float* u) {
  alignas(32) uint32_t words[8];
  alignas(32) float res[8];
  for (int j0 = 0; j0 < n_planes; j0 += 8) {
    const int nj = n_planes - j0 < 8 ? n_planes - j0 : 8;
    __m256 u0 = _mm256_setzero_ps(), u1 = u0;
    for (int t0 = 0; t0 < group; t0 += 32) {
      __m256i wv;
      if (group == 32 && nj == 8) {  // the planes are the words: one load
        wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(planes + 4 * static_cast<int64_t>(j0)));
      } else {
        for (int i = 0; i < 8; ++i) words[i] = i < nj ? plane_word(planes, group, j0 + i, t0) : 0u;
        wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(words));
      }
      const int nt = group - t0 < 32 ? group - t0 : 32;
      int t = 0;
      for (; t + 2 <= nt; t += 2) {
        const __m256i b0 = _mm256_set1_epi32(static_cast<int>(1u << t));
        const __m256i b1 = _mm256_set1_epi32(static_cast<int>(1u << (t + 1)));
        const __m256 m0 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(wv, b0), b0));
        const __m256 m1 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(wv, b1), b1));
        u0 = _mm256_add_ps(u0, _mm256_and_ps(m0, _mm256_broadcast_ss(p + t0 + t)));
        u1 = _mm256_add_ps(u1, _mm256_and_ps(m1, _mm256_broadcast_ss(p + t0 + t + 1)));
      }
      for (; t < nt; ++t) {
        const __m256i b0 = _mm256_set1_epi32(static_cast<int>(1u << t));
        const __m256 m0 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(wv, b0), b0));
        u0 = _mm256_add_ps(u0, _mm256_and_ps(m0, _mm256_broadcast_ss(p + t0 + t)));
      }
    }
    _mm256_store_ps(res, _mm256_add_ps(u0, u1));
    for (int i = 0; i < nj; ++i) u[j0 + i] = res[i];
  }
}

// ---------------- AVX-512 ----------------
#define VLKV_S1_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")))

// The 16 bits of plane j in the slab at pb (planes `stride` bytes apart); the last half
// slab of a group has only 8.
inline __mmask16 slab_mask(const uint8_t* pb, int j, int stride, bool full) {
  const uint8_t* p = pb + static_cast<int64_t>(j) * stride;
  if (!full) return p[0];
  uint16_t m;
  std::memcpy(&m, p, 2);
  return m;
}

VLKV_S1_AVX512 inline void plane_scores_avx512(const uint8_t* planes, int n_planes, int group, const float* w,
                                               float* acc) {
  const int stride = group / 8;
  for (int t0 = 0; t0 < group; t0 += 16) {  // 16 tokens per slab (8 in a last half slab)
    const uint8_t* pb = planes + t0 / 8;
    const bool full = group - t0 >= 16;
    auto mask_of = [&](int j) { return slab_mask(pb, j, stride, full); };
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int j = 0;
    for (; j + 4 <= n_planes; j += 4) {
      a0 = _mm512_mask_add_ps(a0, mask_of(j), a0, _mm512_set1_ps(w[j]));
      a1 = _mm512_mask_add_ps(a1, mask_of(j + 1), a1, _mm512_set1_ps(w[j + 1]));
      a2 = _mm512_mask_add_ps(a2, mask_of(j + 2), a2, _mm512_set1_ps(w[j + 2]));
      a3 = _mm512_mask_add_ps(a3, mask_of(j + 3), a3, _mm512_set1_ps(w[j + 3]));
    }
    for (; j < n_planes; ++j) a0 = _mm512_mask_add_ps(a0, mask_of(j), a0, _mm512_set1_ps(w[j]));
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    const __mmask16 lanes = full ? __mmask16(0xffff) : __mmask16(0xff);
    _mm512_mask_storeu_ps(acc + t0, lanes, _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, acc + t0), sum));
  }
}

// RB query rows at once: each plane's mask is loaded once for all rows (RB independent
// add chains per 16-token slab).
template <int RB>
VLKV_S1_AVX512 inline void plane_scores_rows_avx512(const uint8_t* planes, int n_planes, int group, const float* w,
                                                    const float* base, float scale, float* lg, int64_t ld) {
  const int stride = group / 8;
  for (int t0 = 0; t0 < group; t0 += 16) {
    const uint8_t* pb = planes + t0 / 8;
    const bool full = group - t0 >= 16;
    __m512 a[RB], b[RB];  // even / odd planes
    for (int r = 0; r < RB; ++r) {
      a[r] = _mm512_set1_ps(base[r]);
      b[r] = _mm512_setzero_ps();
    }
    auto mask_of = [&](int j) { return slab_mask(pb, j, stride, full); };
    int j = 0;
    for (; j + 2 <= n_planes; j += 2) {
      const __mmask16 m0 = mask_of(j), m1 = mask_of(j + 1);
      for (int r = 0; r < RB; ++r) {
        a[r] = _mm512_mask_add_ps(a[r], m0, a[r], _mm512_set1_ps(w[static_cast<int64_t>(r) * n_planes + j]));
        b[r] = _mm512_mask_add_ps(b[r], m1, b[r], _mm512_set1_ps(w[static_cast<int64_t>(r) * n_planes + j + 1]));
      }
    }
    if (j < n_planes) {
      const __mmask16 m0 = mask_of(j);
      for (int r = 0; r < RB; ++r)
        a[r] = _mm512_mask_add_ps(a[r], m0, a[r], _mm512_set1_ps(w[static_cast<int64_t>(r) * n_planes + j]));
    }
    const __mmask16 lanes = full ? __mmask16(0xffff) : __mmask16(0xff);
    for (int r = 0; r < RB; ++r)
      _mm512_mask_storeu_ps(lg + r * ld + t0, lanes, _mm512_mul_ps(_mm512_add_ps(a[r], b[r]), _mm512_set1_ps(scale)));
  }
}

VLKV_S1_AVX512 inline void plane_sums_avx512(const uint8_t* planes, int n_planes, int group, const float* p,
                                             float* u) {
  alignas(64) uint32_t words[16];
  for (int j0 = 0; j0 < n_planes; j0 += 16) {
    const int nj = n_planes - j0 < 16 ? n_planes - j0 : 16;
    __m512 u0 = _mm512_setzero_ps(), u1 = u0;
    for (int t0 = 0; t0 < group; t0 += 32) {
      __m512i wv;
      if (group == 32) {  // the planes are the words: one (masked) load
        wv = _mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << nj) - 1), planes + 4 * static_cast<int64_t>(j0));
      } else {
        for (int i = 0; i < 16; ++i) words[i] = i < nj ? plane_word(planes, group, j0 + i, t0) : 0u;
        wv = _mm512_load_si512(words);
      }
      const int nt = group - t0 < 32 ? group - t0 : 32;
      int t = 0;
      for (; t + 2 <= nt; t += 2) {
        const __mmask16 m0 = _mm512_test_epi32_mask(wv, _mm512_set1_epi32(static_cast<int>(1u << t)));
        const __mmask16 m1 = _mm512_test_epi32_mask(wv, _mm512_set1_epi32(static_cast<int>(1u << (t + 1))));
        u0 = _mm512_mask_add_ps(u0, m0, u0, _mm512_set1_ps(p[t0 + t]));
        u1 = _mm512_mask_add_ps(u1, m1, u1, _mm512_set1_ps(p[t0 + t + 1]));
      }
      for (; t < nt; ++t) {
        const __mmask16 m0 = _mm512_test_epi32_mask(wv, _mm512_set1_epi32(static_cast<int>(1u << t)));
        u0 = _mm512_mask_add_ps(u0, m0, u0, _mm512_set1_ps(p[t0 + t]));
      }
    }
    _mm512_mask_storeu_ps(u + j0, static_cast<__mmask16>((1u << nj) - 1), _mm512_add_ps(u0, u1));
  }
}

#undef VLKV_S1_AVX2
#undef VLKV_S1_AVX512

// ---------------- dispatch ----------------
inline void plane_scores(const uint8_t* planes, int n_planes, int group, const float* w, float* acc) {
  switch (simd_level()) {
    case SimdLevel::kAvx512: return plane_scores_avx512(planes, n_planes, group, w, acc);
    case SimdLevel::kAvx2: return plane_scores_avx2(planes, n_planes, group, w, acc);
    default: return plane_scores_scalar(planes, n_planes, group, w, acc);
  }
}

// lg[r * ld + t] = scale * (base[r] + sum_j w[r * n_planes + j] * bit_j(t)), r < n_rows.
//   w: [n_rows, n_planes], base: [n_rows], lg: rows of stride ld, G tokens each.
inline void plane_scores_rows(const uint8_t* planes, int n_planes, int group, const float* w, const float* base,
                              int n_rows, float scale, float* lg, int64_t ld) {
  const SimdLevel level = simd_level();
  if (level == SimdLevel::kScalar) return plane_scores_rows_scalar(planes, n_planes, group, w, base, n_rows, scale, lg, ld);
  for (int r0 = 0; r0 < n_rows; r0 += 4) {
    const int rb = n_rows - r0 < 4 ? n_rows - r0 : 4;
    const float* wr = w + static_cast<int64_t>(r0) * n_planes;
    float* lr = lg + r0 * ld;
    if (level == SimdLevel::kAvx512) {
      switch (rb) {
        case 4: plane_scores_rows_avx512<4>(planes, n_planes, group, wr, base + r0, scale, lr, ld); break;
        case 3: plane_scores_rows_avx512<3>(planes, n_planes, group, wr, base + r0, scale, lr, ld); break;
        case 2: plane_scores_rows_avx512<2>(planes, n_planes, group, wr, base + r0, scale, lr, ld); break;
        default: plane_scores_rows_avx512<1>(planes, n_planes, group, wr, base + r0, scale, lr, ld);
      }
      continue;
    }
    for (int r = 0; r < rb; ++r) {  // AVX2: one row at a time through the accumulating kernel
      float* row = lr + r * ld;
      for (int t = 0; t < group; ++t) row[t] = base[r0 + r];
      plane_scores_avx2(planes, n_planes, group, wr + static_cast<int64_t>(r) * n_planes, row);
      for (int t = 0; t < group; ++t) row[t] *= scale;
    }
  }
}

inline void plane_sums(const uint8_t* planes, int n_planes, int group, const float* p, float* u) {
  switch (simd_level()) {
    case SimdLevel::kAvx512: return plane_sums_avx512(planes, n_planes, group, p, u);
    case SimdLevel::kAvx2: return plane_sums_avx2(planes, n_planes, group, p, u);
    default: return plane_sums_scalar(planes, n_planes, group, p, u);
  }
}

}  // namespace vlkv::sign1
