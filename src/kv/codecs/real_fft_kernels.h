// The dense real-FFT matrix product: scalar reference, SIMD kernels one file per ISA
// (dispatched through sign1_kernels.h):
//   out[0, n) = sum_r in[r] * m[r * n + 0, n)      m: [n, n] row-major, in, out: [n]
#pragma once

#include <algorithm>
#include <cstddef>

namespace vlkv::real_fft_kernels {

inline void axpy_rows_scalar(const float* in, const float* m, int n, float* out) {
  std::fill(out, out + n, 0.0f);
  for (int r = 0; r < n; ++r) {
    const float a = in[r];
    const float* row = m + static_cast<size_t>(r) * n;
    for (int i = 0; i < n; ++i) out[i] += a * row[i];
  }
}

void axpy_rows_avx2(const float* in, const float* m, int n, float* out);

// Eight orthonormal real transforms at once (RealFft::forward_batch8), one per lane:
// a radix-2 complex FFT in f32 over SoA vectors. n a power of two in [4, 128];
// x, c: [n][8]; twr, twi: [n/2] cos(2 pi m/n), -sin(2 pi m/n); bitrev: [n].
void fft_forward_batch8_avx2(const float* x, int n, const float* twr, const float* twi, const int* bitrev, float* c);
void axpy_rows_avx512(const float* in, const float* m, int n, float* out);

}  // namespace vlkv::real_fft_kernels
