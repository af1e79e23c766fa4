// The dense real-FFT matrix product's SIMD kernels (real_fft.cpp; one file per ISA):
//   out[0, n) = sum_r in[r] * m[r * n + 0, n)      m: [n, n] row-major, in, out: [n]
#pragma once

namespace vlkv::real_fft_kernels {

void axpy_rows_avx2(const float* in, const float* m, int n, float* out);
void axpy_rows_avx512(const float* in, const float* m, int n, float* out);

}  // namespace vlkv::real_fft_kernels
