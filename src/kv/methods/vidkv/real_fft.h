// Small real Fourier transforms over a run of channels, for the 1-bit key codecs
// (VidKV's FFT over the "normal" channels). No dependency: a radix-2 FFT for
// power-of-two lengths (O(n log n)) and a precomputed O(n^2) DFT table for other
// lengths (channel counts here are <= 512, so the table is at most 256 K entries
// and only non-power-of-two channel splits pay for it). The orthonormal real
// transform (forward / inverse) of n <= kDenseMaxN instead multiplies by the
// precomputed float matrix F (column by column: AVX2 or AVX-512 kernels in
// real_fft_kernels_*.cpp, else a scalar loop): the mixk codec transforms each query row once per block whose
// channel map changed, and at head_dim 128 that is a 64-point transform per block,
// where the scalar double FFT cost more than the block's dot products. Results
// match the FFT to float rounding (~1e-6 relative; tested). Immutable after
// construction; safe to use from many threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vlkv/status.h"

namespace vlkv {

class RealFft {
 public:
  static constexpr int kMaxN = 512;
  static constexpr int kDenseMaxN = 128;  // dense float matrix path up to here (64 KiB per matrix)
  // 1 <= n <= kMaxN.
  explicit RealFft(int n);
  // A codec's head_dim check for transforms over up to head_dim channels: in [1, kMaxN].
  static Status check_head_dim(const std::string& codec, int head_dim);
  int n() const { return n_; }

  // Orthonormal real Fourier transform c = F x (F orthogonal, so F^-1 = F^T and
  // Parseval holds: |c| = |x|). Half-spectrum ("halfcomplex") order, n reals:
  //   c[0]      = X_0 / sqrt(n)
  //   c[2k-1]   = sqrt(2/n) Re X_k,  c[2k] = sqrt(2/n) Im X_k    for 1 <= k < n/2
  //   c[n-1]    = X_{n/2} / sqrt(n)                              (n even only)
  // with X_k = sum_j x_j e^{-2 pi i j k / n}.
  //   x, c: [n]; may alias.
  void forward(const float* x, float* c) const;
  // x = F^T c (the exact inverse of forward). c, x: [n]; may alias.
  void inverse(const float* c, float* x) const;
  // forward() of 8 vectors at once (vector l at x + l * x_stride, its transform at
  // c + l * c_stride; no alias): an f32 FFT in SIMD lanes when n is a power of two in
  // [8, 128] and the SIMD tier has the kernel (the dense product costs n^2 per vector,
  // this ~n log n), else forward() per vector.
  void forward_batch8(const float* x, int64_t x_stride, float* c, int64_t c_stride) const;

  // Unnormalized full complex spectrum of a real vector (what the released VidKV
  // code keeps: 2n reals). re[k] + i im[k] = X_k for k in [0, n).
  void complex_forward(const float* x, float* re, float* im) const;
  // x_j = Re( (1/n) sum_k (re[k] + i im[k]) e^{+2 pi i j k / n} ). Its adjoint is
  // q -> (Re DFT(q), Im DFT(q)) / n, which is how scores transform the query.
  void complex_inverse_real(const float* re, const float* im, float* x) const;

 private:
  // In-place complex DFT of length n: sign -1 forward, +1 inverse (unnormalized).
  void cdft(double* re, double* im, int sign) const;
  // The unnormalized spectrum of the real x [n]: re, im [n] (cdft forward).
  void real_dft(const float* x, double* re, double* im) const;
  // The FFT-based orthonormal transforms (the reference for the dense path).
  void forward_fft(const float* x, float* c) const;
  void inverse_fft(const float* c, float* x) const;

 public:
  // Test hooks: the FFT reference and the dense path at a given SIMD use (n <= kDenseMaxN).
  void forward_reference(const float* x, float* c) const { forward_fft(x, c); }
  void inverse_reference(const float* c, float* x) const { inverse_fft(c, x); }
  void forward_dense(const float* x, float* c, bool simd) const;
  void inverse_dense(const float* c, float* x, bool simd) const;

 private:

  int n_;
  bool pow2_;
  std::vector<double> cos_, sin_;  // [n] cos/sin(2 pi m / n)
  std::vector<int> bitrev_;        // [n] (power-of-two n only)
  // n <= kDenseMaxN: F^T and F row-major. fwd_[j * n + k] = F[k][j], inv_[k * n + j] = F[k][j]:
  // forward c = sum_j x_j fwd_[j, :], inverse x = sum_k c_k inv_[k, :] (axpy form).
  std::vector<float> fwd_, inv_;
  std::vector<float> twr_, twi_;  // [n/2] cos, -sin(2 pi m / n) (power-of-two n only)
};

}  // namespace vlkv
