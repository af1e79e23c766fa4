// The dense real-FFT matrix product: scalar reference, SIMD kernels one file per ISA
// (dispatched through sign1_kernels.h):
//   out[0, n) = sum_r in[r] * m[r * n + 0, n)      m: [n, n] row-major, in, out: [n]
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

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

// Eight orthonormal real transforms at once (RealFft::forward_batch8): the vectors
// transposed into SIMD lanes, a radix-2 complex FFT in f32, transposed back. n a power of
// two in [8, 128]; x: 8 rows of n at x + l * x_stride, c likewise; twr, twi: [n/2]
// cos(2 pi m/n), -sin(2 pi m/n); bitrev: [n].
void fft_forward_batch8_avx2(const float* x, int64_t x_stride, int n, const float* twr, const float* twi,
                             const int* bitrev, float* c, int64_t c_stride);
void axpy_rows_avx512(const float* in, const float* m, int n, float* out);
void axpy_rows_neon(const float* in, const float* m, int n, float* out);  // real_fft_kernels_arm.cpp

}  // namespace vlkv::real_fft_kernels
