// NEON kernel of the dense real-FFT matrix product (real_fft_kernels.h): 32 outputs in 8
// registers per pass, each output one fused multiply-add chain over the rows in order, as
// axpy_rows_avx2 (so the x86 SIMD tiers' bits; the scalar reference rounds each product).
#include <arm_neon.h>

#include <cmath>
#include <cstddef>

#include "kv/methods/vidkv/real_fft_kernels.h"

namespace vlkv::real_fft_kernels {

void axpy_rows_neon(const float* in, const float* m, int n, float* out) {
  int i0 = 0;
  for (; i0 + 32 <= n; i0 += 32) {
    float32x4_t acc[8];
    for (auto& a : acc) a = vdupq_n_f32(0.0f);
    const float* row = m + i0;
    for (int r = 0; r < n; ++r, row += n) {
      const float32x4_t a = vdupq_n_f32(in[r]);
      for (int u = 0; u < 8; ++u) acc[u] = vfmaq_f32(acc[u], a, vld1q_f32(row + 4 * u));
    }
    for (int u = 0; u < 8; ++u) vst1q_f32(out + i0 + 4 * u, acc[u]);
  }
  for (; i0 < n; ++i0) {  // n < 32 or a tail: one chain per output
    float acc = 0.0f;
    for (int r = 0; r < n; ++r) acc = std::fma(in[r], m[static_cast<size_t>(r) * n + i0], acc);
    out[i0] = acc;
  }
}

}  // namespace vlkv::real_fft_kernels
