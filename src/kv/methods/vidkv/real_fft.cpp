#include "kv/methods/vidkv/real_fft.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "base/check.h"
#include "base/cpu_features.h"
#include "kv/methods/vidkv/real_fft_kernels.h"
#include "kv/methods/vidkv/sign1_kernels.h"

namespace vlkv {

RealFft::RealFft(int n) : n_(n), pow2_(n > 0 && (n & (n - 1)) == 0) {
  VLKV_CHECK_MSG(n >= 1 && n <= kMaxN, "RealFft length out of range");
  cos_.resize(n);
  sin_.resize(n);
  for (int m = 0; m < n; ++m) {
    const double a = 2.0 * std::numbers::pi * m / n;
    cos_[m] = std::cos(a);
    sin_[m] = std::sin(a);
  }
  if (pow2_) {
    bitrev_.resize(n);
    int bits = 0;
    while ((1 << bits) < n) ++bits;
    for (int i = 0; i < n; ++i) {
      int r = 0;
      for (int b = 0; b < bits; ++b) r |= ((i >> b) & 1) << (bits - 1 - b);
      bitrev_[i] = r;
    }
  }
  if (pow2_) {
    twr_.resize(n / 2);
    twi_.resize(n / 2);
    for (int m = 0; m < n / 2; ++m) {
      twr_[m] = static_cast<float>(cos_[m]);
      twi_[m] = static_cast<float>(-sin_[m]);
    }
  }
  if (n <= kDenseMaxN) {  // F from the double FFT of the unit vectors, rounded once to float
    fwd_.resize(static_cast<size_t>(n) * n);
    inv_.resize(fwd_.size());
    std::vector<float> e(n, 0.0f), col(n);
    for (int j = 0; j < n; ++j) {
      e[j] = 1.0f;
      forward_fft(e.data(), col.data());
      e[j] = 0.0f;
      for (int k = 0; k < n; ++k) {
        fwd_[static_cast<size_t>(j) * n + k] = col[k];
        inv_[static_cast<size_t>(k) * n + j] = col[k];
      }
    }
  }
}

namespace {

void axpy_rows(const float* in, const float* m, int n, float* out, bool simd) {
  if (simd) return sign1::sign1_kernels().fft_axpy_rows(in, m, n, out);
  real_fft_kernels::axpy_rows_scalar(in, m, n, out);
}

}  // namespace

void RealFft::forward_dense(const float* x, float* c, bool simd) const {
  VLKV_CHECK(!fwd_.empty());
  float tmp[kDenseMaxN];  // x and c may alias
  std::memcpy(tmp, x, sizeof(float) * n_);
  axpy_rows(tmp, fwd_.data(), n_, c, simd);
}

void RealFft::inverse_dense(const float* c, float* x, bool simd) const {
  VLKV_CHECK(!inv_.empty());
  float tmp[kDenseMaxN];
  std::memcpy(tmp, c, sizeof(float) * n_);
  axpy_rows(tmp, inv_.data(), n_, x, simd);
}

void RealFft::forward(const float* x, float* c) const {
  if (!fwd_.empty()) return forward_dense(x, c, true);
  forward_fft(x, c);
}

void RealFft::inverse(const float* c, float* x) const {
  if (!inv_.empty()) return inverse_dense(c, x, true);
  inverse_fft(c, x);
}

void RealFft::forward_batch8(const float* x, int64_t x_stride, float* c, int64_t c_stride) const {
  const auto kernel = sign1::sign1_kernels().fft_forward_batch8;
  if (kernel && pow2_ && n_ >= 8 && n_ <= kDenseMaxN)
    return kernel(x, x_stride, n_, twr_.data(), twi_.data(), bitrev_.data(), c, c_stride);
  for (int l = 0; l < 8; ++l) forward(x + l * x_stride, c + l * c_stride);
}

void RealFft::cdft(double* re, double* im, int sign) const {
  const int n = n_;
  if (pow2_) {  // iterative radix-2 decimation in time
    for (int i = 0; i < n; ++i) {
      const int j = bitrev_[i];
      if (j > i) {
        std::swap(re[i], re[j]);
        std::swap(im[i], im[j]);
      }
    }
    for (int len = 2; len <= n; len <<= 1) {
      const int half = len >> 1, step = n / len;
      for (int i = 0; i < n; i += len)
        for (int k = 0; k < half; ++k) {
          const double wr = cos_[k * step], wi = sign * sin_[k * step];
          const int a = i + k, b = a + half;
          const double tr = re[b] * wr - im[b] * wi, ti = re[b] * wi + im[b] * wr;
          re[b] = re[a] - tr;
          im[b] = im[a] - ti;
          re[a] += tr;
          im[a] += ti;
        }
    }
    return;
  }
  double tr[kMaxN], ti[kMaxN];  // direct DFT from the twiddle table
  for (int k = 0; k < n; ++k) {
    double sr = 0, si = 0;
    for (int j = 0, m = 0; j < n; ++j, m = (m + k) % n) {
      const double wr = cos_[m], wi = sign * sin_[m];
      sr += re[j] * wr - im[j] * wi;
      si += re[j] * wi + im[j] * wr;
    }
    tr[k] = sr;
    ti[k] = si;
  }
  for (int k = 0; k < n; ++k) {
    re[k] = tr[k];
    im[k] = ti[k];
  }
}

Status RealFft::check_head_dim(const std::string& codec, int head_dim) {
  if (head_dim < 1 || head_dim > kMaxN)
    return invalid_argument(codec + ": head_dim " + std::to_string(head_dim) + " is outside [1, " +
                            std::to_string(kMaxN) + "]");
  return Status::ok();
}

void RealFft::real_dft(const float* x, double* re, double* im) const {
  for (int j = 0; j < n_; ++j) {
    re[j] = x[j];
    im[j] = 0;
  }
  cdft(re, im, -1);
}

void RealFft::forward_fft(const float* x, float* c) const {
  const int n = n_;
  double re[kMaxN], im[kMaxN];
  real_dft(x, re, im);
  const double a = 1.0 / std::sqrt(static_cast<double>(n)), b = std::sqrt(2.0 / n);
  c[0] = static_cast<float>(re[0] * a);
  for (int k = 1; 2 * k < n; ++k) {
    c[2 * k - 1] = static_cast<float>(re[k] * b);
    c[2 * k] = static_cast<float>(im[k] * b);
  }
  if (n % 2 == 0 && n > 1) c[n - 1] = static_cast<float>(re[n / 2] * a);
}

void RealFft::inverse_fft(const float* c, float* x) const {
  const int n = n_;
  double re[kMaxN], im[kMaxN];
  const double a = std::sqrt(static_cast<double>(n)), b = std::sqrt(n / 2.0);
  re[0] = c[0] * a;
  im[0] = 0;
  for (int k = 1; 2 * k < n; ++k) {  // Hermitian spectrum X_{n-k} = conj(X_k)
    re[k] = re[n - k] = c[2 * k - 1] * b;
    im[k] = c[2 * k] * b;
    im[n - k] = -im[k];
  }
  if (n % 2 == 0 && n > 1) {
    re[n / 2] = c[n - 1] * a;
    im[n / 2] = 0;
  }
  cdft(re, im, +1);
  for (int j = 0; j < n; ++j) x[j] = static_cast<float>(re[j] / n);
}

void RealFft::complex_forward(const float* x, float* re_out, float* im_out) const {
  const int n = n_;
  double re[kMaxN], im[kMaxN];
  real_dft(x, re, im);
  for (int k = 0; k < n; ++k) {
    re_out[k] = static_cast<float>(re[k]);
    im_out[k] = static_cast<float>(im[k]);
  }
}

void RealFft::complex_inverse_real(const float* re_in, const float* im_in, float* x) const {
  const int n = n_;
  double re[kMaxN], im[kMaxN];
  for (int k = 0; k < n; ++k) {
    re[k] = re_in[k];
    im[k] = im_in[k];
  }
  cdft(re, im, +1);
  for (int j = 0; j < n; ++j) x[j] = static_cast<float>(re[j] / n);
}

}  // namespace vlkv
