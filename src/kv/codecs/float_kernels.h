// Fused scores/accumulate for codecs that store each token as head_dim plain floats
// (f32) or IEEE halves (f16): one block = one token row. The scalar reference is here;
// the AVX2, AVX-512 and NEON variants live in float_kernels_avx2.cpp, _avx512.cpp and _arm.cpp,
// one dispatch table (base/simd_dispatch.h). Internal to codecs/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "base/simd_dispatch.h"
#include "kv/codec.h"

namespace vlkv::float_kernels {

// Elem: float (f32 codec) or uint16_t (f16 codec: IEEE half bits).
template <class Elem>
inline float to_f32(Elem x) {
  if constexpr (std::is_same_v<Elem, float>) return x;
  else return fp16_to_fp32(x);
}

// ---------------- scalar reference ----------------
template <class Elem>
void scores_scalar(const float* q, int n_q, const SegmentView& s, float scale, float* logits, int64_t ld) {
  const int d = s.head_dim;
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    const Elem* k = reinterpret_cast<const Elem*>(s.block(t));  // [head_dim]
    for (int r = 0; r < n_q; ++r) {
      float acc = 0.0f;
      for (int i = 0; i < d; ++i) acc += q[r * d + i] * to_f32(k[i]);
      logits[r * ld + t] = acc * scale;
    }
  }
}

template <class Elem>
void accumulate_scalar(const float* p, int64_t ld, int n_q, const SegmentView& s, float* out) {
  const int d = s.head_dim;
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    const Elem* v = reinterpret_cast<const Elem*>(s.block(t));  // [head_dim]
    for (int r = 0; r < n_q; ++r) {
      const float w = p[r * ld + t];
      for (int i = 0; i < d; ++i) out[r * d + i] += w * to_f32(v[i]);
    }
  }
}

// ---------------- dispatch ----------------
struct FloatKernels {
  using Scores = void (*)(const float* q, int n_q, const SegmentView& s, float scale, float* logits, int64_t ld);
  using Accumulate = void (*)(const float* p, int64_t ld, int n_q, const SegmentView& s, float* out);
  Scores scores_f32 = nullptr, scores_f16 = nullptr;
  Accumulate accumulate_f32 = nullptr, accumulate_f16 = nullptr;
};
extern const FloatKernels kFloatKernelsAvx2;
extern const FloatKernels kFloatKernelsAvx512;
extern const FloatKernels kFloatKernelsNeon;  // float_kernels_arm.cpp (every ARM64 tier)
const FloatKernels& float_kernels_table();  // the current tier's variant

template <class Elem>
void scores(const float* q, int n_q, const SegmentView& s, float scale, float* logits, int64_t ld) {
  const FloatKernels& k = float_kernels_table();
  (std::is_same_v<Elem, float> ? k.scores_f32 : k.scores_f16)(q, n_q, s, scale, logits, ld);
}

template <class Elem>
void accumulate(const float* p, int64_t ld, int n_q, const SegmentView& s, float* out) {
  const FloatKernels& k = float_kernels_table();
  (std::is_same_v<Elem, float> ? k.accumulate_f32 : k.accumulate_f16)(p, ld, n_q, s, out);
}

}  // namespace vlkv::float_kernels
