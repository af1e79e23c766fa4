// AVX2 kernel of the dense real-FFT matrix product (real_fft_kernels.h): 64 outputs in 8
// registers per pass (independent FMA chains), the tail of n % 8 outputs masked.
#include <immintrin.h>

#include <cmath>

#include "base/simd_dispatch.h"
#include "kv/methods/vidkv/real_fft_kernels.h"

namespace vlkv::real_fft_kernels {

VLKV_TARGET(VLKV_ISA_AVX2) void axpy_rows_avx2(const float* in, const float* m, int n, float* out) {
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

namespace {

// r[0..8) = the 8 x 8 block's columns (r[i][l] = in[l][i]).
VLKV_TARGET(VLKV_ISA_AVX2) inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

}  // namespace

VLKV_TARGET(VLKV_ISA_AVX2) void fft_forward_batch8_avx2(const float* x, int64_t x_stride, int n,
                                                                  const float* twr, const float* twi, const int* bitrev,
                                                                  float* c, int64_t c_stride) {
  alignas(32) float xs[128 * 8], re[128 * 8], im[128 * 8];  // [n][8]: lane l = vector l
  for (int i0 = 0; i0 < n; i0 += 8) {
    __m256 r[8];
    for (int l = 0; l < 8; ++l) r[l] = _mm256_loadu_ps(x + l * x_stride + i0);
    transpose8(r);
    for (int m = 0; m < 8; ++m) _mm256_store_ps(xs + 8 * (i0 + m), r[m]);
  }
  x = xs;
  // A real transform of n as a complex one of N = n/2: z_m = x_2m + i x_2m+1, Z = DFT_N(z)
  // (radix 2; its twiddles are every other one of the n-table, its bit reversal
  // bitrev_N(m) = bitrev[2 m]), then X_k = E_k + W^k O_k with E_k = (Z_k + conj Z_N-k) / 2,
  // O_k = (Z_k - conj Z_N-k) / 2i, W = e^{-2 pi i / n}: half the butterflies of a length-n
  // complex FFT on a zero imaginary part.
  const int N = n / 2;
  for (int i = 0; i < N; i += 2) {  // stage 1 (len 2, twiddle 1) on the bit-reversed input
    const float* za = x + 16 * bitrev[2 * i];
    const float* zb = x + 16 * bitrev[2 * i + 2];
    const __m256 ar = _mm256_load_ps(za), ai = _mm256_load_ps(za + 8);
    const __m256 br = _mm256_load_ps(zb), bi = _mm256_load_ps(zb + 8);
    _mm256_store_ps(re + 8 * i, _mm256_add_ps(ar, br));
    _mm256_store_ps(im + 8 * i, _mm256_add_ps(ai, bi));
    _mm256_store_ps(re + 8 * (i + 1), _mm256_sub_ps(ar, br));
    _mm256_store_ps(im + 8 * (i + 1), _mm256_sub_ps(ai, bi));
  }
  for (int len = 4; len <= N; len <<= 1) {
    const int half = len >> 1, step = n / len;  // N-table index k * N/len = n-table index k * n/len
    for (int k = 0; k < half; ++k) {
      const __m256 wr = _mm256_set1_ps(twr[k * step]), wi = _mm256_set1_ps(twi[k * step]);
      for (int i = k; i < N; i += len) {
        float *ra = re + 8 * i, *ia = im + 8 * i, *rb = ra + 8 * half, *ib = ia + 8 * half;
        const __m256 xr = _mm256_load_ps(rb), xi = _mm256_load_ps(ib);
        const __m256 tr = _mm256_fmsub_ps(xr, wr, _mm256_mul_ps(xi, wi));
        const __m256 ti = _mm256_fmadd_ps(xr, wi, _mm256_mul_ps(xi, wr));
        const __m256 ar = _mm256_load_ps(ra), ai = _mm256_load_ps(ia);
        _mm256_store_ps(rb, _mm256_sub_ps(ar, tr));
        _mm256_store_ps(ib, _mm256_sub_ps(ai, ti));
        _mm256_store_ps(ra, _mm256_add_ps(ar, tr));
        _mm256_store_ps(ia, _mm256_add_ps(ai, ti));
      }
    }
  }
  // Halfcomplex order, orthonormal: c0 = X0/sqrt(n), c[2k-1], c[2k] = sqrt(2/n) (Re, Im) X_k,
  // c[n-1] = X_{n/2}/sqrt(n); X_0 = Re Z_0 + Im Z_0, X_N = Re Z_0 - Im Z_0.
  const __m256 sa = _mm256_set1_ps(1.0f / std::sqrt(static_cast<float>(n))), sb = _mm256_set1_ps(std::sqrt(2.0f / n));
  const __m256 half = _mm256_set1_ps(0.5f);
  float* cs = xs;  // [n][8] halfcomplex coefficients, then transposed to the rows of c
  const __m256 z0r = _mm256_load_ps(re), z0i = _mm256_load_ps(im);
  _mm256_store_ps(cs, _mm256_mul_ps(_mm256_add_ps(z0r, z0i), sa));
  _mm256_store_ps(cs + 8 * (n - 1), _mm256_mul_ps(_mm256_sub_ps(z0r, z0i), sa));
  for (int k = 1; k < N; ++k) {
    const __m256 ar = _mm256_load_ps(re + 8 * k), ai = _mm256_load_ps(im + 8 * k);
    const __m256 br = _mm256_load_ps(re + 8 * (N - k)), bi = _mm256_load_ps(im + 8 * (N - k));  // B = conj Z_N-k
    const __m256 er = _mm256_mul_ps(_mm256_add_ps(ar, br), half), ei = _mm256_mul_ps(_mm256_sub_ps(ai, bi), half);
    // O = -i (A - B) / 2: O_re = (A - B)_im / 2, O_im = -(A - B)_re / 2, with (A - B)_im = ai + bi.
    const __m256 orr = _mm256_mul_ps(_mm256_add_ps(ai, bi), half), oi = _mm256_mul_ps(_mm256_sub_ps(br, ar), half);
    const __m256 wr = _mm256_set1_ps(twr[k]), wi = _mm256_set1_ps(twi[k]);
    const __m256 xr = _mm256_add_ps(er, _mm256_fmsub_ps(wr, orr, _mm256_mul_ps(wi, oi)));
    const __m256 xi = _mm256_add_ps(ei, _mm256_fmadd_ps(wr, oi, _mm256_mul_ps(wi, orr)));
    _mm256_store_ps(cs + 8 * (2 * k - 1), _mm256_mul_ps(xr, sb));
    _mm256_store_ps(cs + 8 * (2 * k), _mm256_mul_ps(xi, sb));
  }
  for (int i0 = 0; i0 < n; i0 += 8) {
    __m256 r[8];
    for (int m = 0; m < 8; ++m) r[m] = _mm256_load_ps(cs + 8 * (i0 + m));
    transpose8(r);
    for (int l = 0; l < 8; ++l) _mm256_storeu_ps(c + l * c_stride + i0, r[l]);
  }
}

}  // namespace vlkv::real_fft_kernels
