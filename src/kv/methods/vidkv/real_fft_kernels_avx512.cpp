// AVX-512 kernel of the dense real-FFT matrix product (real_fft_kernels.h).
#include <immintrin.h>

#include "base/simd_dispatch.h"
#include "kv/methods/vidkv/real_fft_kernels.h"

namespace vlkv::real_fft_kernels {

VLKV_TARGET(VLKV_ISA_AVX512) void axpy_rows_avx512(const float* in, const float* m, int n, float* out) {
  for (int i0 = 0; i0 < n; i0 += 64) {  // 64 outputs in 4 registers (tail lanes masked)
    __mmask16 mask[4];
    __m512 acc0[4], acc1[4];  // even / odd rows: 8 independent FMA chains
    for (int u = 0; u < 4; ++u) {
      const int left = n - i0 - 16 * u;
      mask[u] = left >= 16 ? __mmask16(0xffff) : left > 0 ? __mmask16((1u << left) - 1) : __mmask16(0);
      acc0[u] = acc1[u] = _mm512_setzero_ps();
    }
    const float* row = m + i0;
    int r = 0;
    for (; r + 2 <= n; r += 2, row += 2 * static_cast<size_t>(n)) {
      const __m512 a0 = _mm512_set1_ps(in[r]), a1 = _mm512_set1_ps(in[r + 1]);
      for (int u = 0; u < 4; ++u) {
        acc0[u] = _mm512_fmadd_ps(a0, _mm512_maskz_loadu_ps(mask[u], row + 16 * u), acc0[u]);
        acc1[u] = _mm512_fmadd_ps(a1, _mm512_maskz_loadu_ps(mask[u], row + n + 16 * u), acc1[u]);
      }
    }
    if (r < n) {
      const __m512 a0 = _mm512_set1_ps(in[r]);
      for (int u = 0; u < 4; ++u) acc0[u] = _mm512_fmadd_ps(a0, _mm512_maskz_loadu_ps(mask[u], row + 16 * u), acc0[u]);
    }
    for (int u = 0; u < 4; ++u) _mm512_mask_storeu_ps(out + i0 + 16 * u, mask[u], _mm512_add_ps(acc0[u], acc1[u]));
  }
}

}  // namespace vlkv::real_fft_kernels
