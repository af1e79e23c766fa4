// Internals shared by the weight-format files of src/quant/ (not used outside it):
// the per-type WeightFormat entries and their SIMD variants, the dispatch trampolines,
// little-endian field access and the scalar dots that back every format's scalar tier.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/check.h"
#include "base/fp16.h"
#include "base/simd_dispatch.h"
#include "quant/weight_format.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and trip -W(maybe-)uninitialized
// once inlined (GCC bug 105593, fixed in 13). The files of src/quant/ include this header,
// so the false positive is silenced for them only.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace vlkv::quant {

// One entry per file in src/quant/; weight_format.cpp collects them into the registry.
extern const WeightFormat kF32Format;
extern const WeightFormat kF16Format;
extern const WeightFormat kBf16Format;
extern const WeightFormat kQ8_0Format;
extern const WeightFormat kQ4_0Format;
extern const WeightFormat kQ4_1Format;
extern const WeightFormat kQ5_0Format;
extern const WeightFormat kQ5_1Format;
extern const WeightFormat kQ4_KFormat;
extern const WeightFormat kQ5_KFormat;
extern const WeightFormat kQ6_KFormat;

// The SIMD variants of each format (<type>_x86.cpp, <type>_arm.cpp); the scalar one is
// private to <type>.cpp.
#define VLKV_FORMAT_VARIANTS(F)                                                            \
  extern const FormatKernels F##Avx2, F##Avx512, F##Avx512Vnni; /* <type>_x86.cpp */      \
  extern const FormatKernels F##Neon, F##Dotprod;               /* <type>_arm.cpp */
VLKV_FORMAT_VARIANTS(kF32)
VLKV_FORMAT_VARIANTS(kF16)
VLKV_FORMAT_VARIANTS(kBf16)
VLKV_FORMAT_VARIANTS(kQ8_0)
VLKV_FORMAT_VARIANTS(kQ4_0)
VLKV_FORMAT_VARIANTS(kQ4_1)
VLKV_FORMAT_VARIANTS(kQ5_0)
VLKV_FORMAT_VARIANTS(kQ5_1)
VLKV_FORMAT_VARIANTS(kQ4_K)
VLKV_FORMAT_VARIANTS(kQ5_K)
VLKV_FORMAT_VARIANTS(kQ6_K)
#undef VLKV_FORMAT_VARIANTS
// AVX-VNNI's 8-bit kernels: q8_0_x86.cpp (lane kernels), q4_k/q5_k/q6_k_x86.cpp (strided matvec)
extern const FormatKernels kQ8_0Avx2Vnni, kQ4_KAvx2Vnni, kQ5_KAvx2Vnni, kQ6_KAvx2Vnni;

// A format's tier table from its scalar variant and the ISA variants its files define
// (x86: every format; ARM: those with a <type>_arm.cpp pass them, the rest nullptr).
inline SimdVariants<FormatKernels> format_variants(const FormatKernels* scalar, const FormatKernels* avx2,
                                                   const FormatKernels* avx512, const FormatKernels* avx512_vnni,
                                                   const FormatKernels* neon, const FormatKernels* dotprod) {
  return {.scalar = scalar, .avx2 = avx2, .avx512 = avx512, .avx512_vnni = avx512_vnni, .neon = neon,
          .dotprod = dotprod};
}

// WeightFormat's fast paths: the current tier's entry of the format's table K().
template <const FormatKernels& (*K)()>
struct Dispatched {
  static void dequantize(const void* src, float* dst, int64_t n) { K().dequantize_row(src, dst, n); }
  static float dot(const void* row, const float* x, int64_t n) { return K().dot(row, x, n); }
  static float dot_q8(const void* row, const Q8Activations& x, int64_t n) { return K().dot_q8(row, x, n); }
  // WeightFormat::dot_q8_strided's bounds, then the tier's kernel, or a dot_q8 per row where
  // the tier has none.
  static void dot_q8_strided(const void* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n,
                             float* out) {
    VLKV_CHECK(n_rows >= 1 && n_rows <= kLaneRows + 1 && stride >= 0);
    const FormatKernels& k = K();
    if (k.dot_q8_strided) return k.dot_q8_strided(base, stride, n_rows, x, n, out);
    for (int r = 0; r < n_rows; ++r) out[r] = k.dot_q8(static_cast<const uint8_t*>(base) + r * stride, x, n);
  }
};

// A strided kernel on byte pointers (the x86 8-bit kernels' signature) as FormatKernels
// entries: the matvec itself, and the one-row dot as a strided call of one row (so the two
// agree bit for bit).
using StridedQ8Fn = void (*)(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n,
                             float* out);
template <StridedQ8Fn S>
void strided_q8(const void* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  S(static_cast<const uint8_t*>(base), stride, n_rows, x, n, out);
}
template <StridedQ8Fn S>
float one_row_q8(const void* row, const Q8Activations& x, int64_t n) {
  float out;
  S(static_cast<const uint8_t*>(row), 0, 1, x, n, &out);
  return out;
}
// A tier's kernels k with its 8-bit dots taken from the strided kernel S.
template <StridedQ8Fn S>
constexpr FormatKernels with_strided_q8(FormatKernels k) {
  k.dot_q8 = one_row_q8<S>;
  k.dot_q8_strided = strided_q8<S>;
  return k;
}

// A tier's kernels k with the packed-layout decode kernel P (quant/k_packed.h).
using Packed8Fn = void (*)(const void* group, const Q8Activations& x, int64_t n, float* out);
template <Packed8Fn P>
constexpr FormatKernels with_packed8(FormatKernels k) {
  k.dot_q8_packed8 = P;
  return k;
}

// GGUF stores all fields little-endian; x86 is little-endian, memcpy avoids unaligned UB.
inline float load_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}
inline void store_half(uint8_t* p, float f) {
  const uint16_t h = fp32_to_fp16(f);
  std::memcpy(p, &h, 2);
}
inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Round to nearest, ties to even (what ggml's nearest_int does for |f| < 2^22).
inline int nearest_int(float f) { return static_cast<int>(std::lrint(f)); }

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block,
// unpacked from its 12 packed bytes exactly as ggml's get_scale_min_k4.
inline void unpack_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}
// Inverse of unpack_scale_min_k4 for all 8 sub-blocks (values 0..63).
inline void pack_scale_min_k4(const uint8_t* ls, const uint8_t* lm, uint8_t* q) {
  std::memset(q, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      q[j] = ls[j];
      q[j + 4] = lm[j];
    } else {
      q[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      q[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      q[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// kScalar dot of every format: dequantize a chunk with the reference, then an f32 dot
// with 8 partial sums. Deq must accept any multiple of kBlockElems elements.
template <void (*Deq)(const void*, float*, int64_t), int64_t kBlockElems, size_t kBlockBytes>
float dot_scalar(const void* row, const float* x, int64_t n) {
  constexpr int64_t kChunk = kBlockElems >= 256 ? kBlockElems : (256 / kBlockElems) * kBlockElems;
  const auto* p = static_cast<const uint8_t*>(row);
  float buf[kChunk];  // [kChunk] dequantized weights
  float acc[8] = {};
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t len = std::min(kChunk, n - i);
    Deq(p + (i / kBlockElems) * kBlockBytes, buf, len);
    int64_t j = 0;
    for (; j + 8 <= len; j += 8) {
      for (int k = 0; k < 8; ++k) acc[k] += buf[j + k] * x[i + j + k];
    }
    for (; j < len; ++j) acc[0] += buf[j] * x[i + j];
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Scalar reference of dot_q8: exact dequantization, then sum w * q * d in double.
template <void (*Deq)(const void*, float*, int64_t), int64_t kBlockElems, size_t kBlockBytes>
float dot_q8_scalar(const void* row, const Q8Activations& x, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(row);
  float buf[kBlockElems];  // one dequantized block
  double acc = 0.0;
  for (int64_t b = 0; b < n / kBlockElems; ++b) {
    Deq(p + b * kBlockBytes, buf, kBlockElems);
    for (int64_t j = 0; j < kBlockElems; ++j) {
      const int64_t i = b * kBlockElems + j;
      acc += static_cast<double>(buf[j]) * x.q[static_cast<size_t>(i)] * x.d[static_cast<size_t>(i / 32)];
    }
  }
  return static_cast<float>(acc);
}

// The scalar variant of a block format with dot_q8, from its reference dequantizer Deq.
template <void (*Deq)(const void*, float*, int64_t), int64_t kBlockElems, size_t kBlockBytes>
inline const FormatKernels kBlockScalar = {Deq, dot_scalar<Deq, kBlockElems, kBlockBytes>,
                                           dot_q8_scalar<Deq, kBlockElems, kBlockBytes>};

// The tier table of a block format with dot_q8: kBlockScalar, then the ISA variants its
// files define (as format_variants).
template <void (*Deq)(const void*, float*, int64_t), int64_t kBlockElems, size_t kBlockBytes>
const FormatKernels& block_format_table(const FormatKernels* avx2, const FormatKernels* avx512,
                                        const FormatKernels* avx512_vnni, const FormatKernels* neon,
                                        const FormatKernels* dotprod) {
  static const SimdTable<FormatKernels> table(
      format_variants(&kBlockScalar<Deq, kBlockElems, kBlockBytes>, avx2, avx512, avx512_vnni, neon, dotprod));
  return table.get();
}

// The WeightFormat entry of a block format with dot_q8, its fast paths through the tier table K().
template <const FormatKernels& (*K)()>
constexpr WeightFormat block_format(GgmlType type, const char* name, int64_t block_elems, size_t block_bytes,
                                    void (*dequantize_ref)(const void*, float*, int64_t),
                                    void (*quantize_ref)(const float*, void*, int64_t)) {
  return {type, name, block_elems, block_bytes, dequantize_ref, quantize_ref, Dispatched<K>::dequantize,
          Dispatched<K>::dot, Dispatched<K>::dot_q8, nullptr, nullptr, K};
}
// The tier table of a format whose variants are the constant *V (VLKV_SIMD_VARIANTS).
template <const SimdVariants<FormatKernels>* V>
const FormatKernels& format_table() {
  static const SimdTable<FormatKernels> table(*V);
  return table.get();
}

// A K-quant's entry (super-blocks of 256, strided 8-bit kernels at every tier): block_format
// with dot_q8_strided, its fast paths through format_table<V>.
template <const SimdVariants<FormatKernels>* V>
constexpr WeightFormat k_quant_format(GgmlType type, const char* name, size_t block_bytes,
                                      void (*dequantize_ref)(const void*, float*, int64_t),
                                      void (*quantize_ref)(const float*, void*, int64_t)) {
  WeightFormat f = block_format<format_table<V>>(type, name, 256, block_bytes, dequantize_ref, quantize_ref);
  f.dot_q8_strided = Dispatched<format_table<V>>::dot_q8_strided;
  return f;
}

// The value of largest magnitude of x[0, n) (the first of equal magnitudes), as ggml's
// symmetric quantizers pick it.
inline float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}
inline void min_max(const float* x, int n, float* min, float* max) {
  *min = *max = x[0];
  for (int j = 1; j < n; ++j) {
    *min = std::min(*min, x[j]);
    *max = std::max(*max, x[j]);
  }
}

}  // namespace vlkv::quant
