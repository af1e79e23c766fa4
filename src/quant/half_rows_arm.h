// The NEON row kernels of the 16-bit float weight formats (F16, BF16) and F32: they differ
// only in how 4 elements widen to f32, supplied by a traits type:
//   struct Traits { using Elem = ...; static float to_f32(Elem); static float32x4_t widen4(const Elem*); };
#pragma once

#include <arm_neon.h>

#include <cstdint>

#include "quant/quant_internal.h"

namespace vlkv::quant::half_rows {

template <class T>
void dequantize_neon(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const typename T::Elem*>(src);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, T::widen4(h + i));
  for (; i < n; ++i) dst[i] = T::to_f32(h[i]);
}

// Four accumulators of 4 lanes (16 elements per step), then one horizontal sum.
template <class T>
float dot_neon(const void* row, const float* x, int64_t n) {
  const auto* h = static_cast<const typename T::Elem*>(row);
  float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = vfmaq_f32(a0, T::widen4(h + i), vld1q_f32(x + i));
    a1 = vfmaq_f32(a1, T::widen4(h + i + 4), vld1q_f32(x + i + 4));
    a2 = vfmaq_f32(a2, T::widen4(h + i + 8), vld1q_f32(x + i + 8));
    a3 = vfmaq_f32(a3, T::widen4(h + i + 12), vld1q_f32(x + i + 12));
  }
  for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, T::widen4(h + i), vld1q_f32(x + i));
  float sum = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
  for (; i < n; ++i) sum += T::to_f32(h[i]) * x[i];
  return sum;
}

template <class T>
constexpr FormatKernels neon_variant() {
  return {dequantize_neon<T>, dot_neon<T>};
}

}  // namespace vlkv::quant::half_rows
