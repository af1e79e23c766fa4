// AVX2 kernel of the dense real-FFT matrix product (real_fft_kernels.h): 64 outputs in 8
// registers per pass (independent FMA chains), the tail of n % 8 outputs masked.
#include <immintrin.h>

#include "kv/codecs/real_fft_kernels.h"

namespace vlkv::real_fft_kernels {

__attribute__((target("avx2,fma"))) void axpy_rows_avx2(const float* in, const float* m, int n, float* out) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int i0 = 0; i0 < n; i0 += 64) {
    __m256i mask[8];
    __m256 acc[8];
    for (int u = 0; u < 8; ++u) {
      mask[u] = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - i0 - 8 * u), lane);  // lanes still < n
      acc[u] = _mm256_setzero_ps();
    }
    const int nu = (n - i0 + 7) / 8 < 8 ? (n - i0 + 7) / 8 : 8;
    const bool full = n - i0 >= 64;
    const float* row = m + i0;
    for (int r = 0; r < n; ++r, row += n) {
      const __m256 a = _mm256_broadcast_ss(in + r);
      if (full) {
        for (int u = 0; u < 8; ++u) acc[u] = _mm256_fmadd_ps(a, _mm256_loadu_ps(row + 8 * u), acc[u]);
      } else {
        for (int u = 0; u < nu; ++u) acc[u] = _mm256_fmadd_ps(a, _mm256_maskload_ps(row + 8 * u, mask[u]), acc[u]);
      }
    }
    for (int u = 0; u < nu; ++u) _mm256_maskstore_ps(out + i0 + 8 * u, mask[u], acc[u]);
  }
}

}  // namespace vlkv::real_fft_kernels
