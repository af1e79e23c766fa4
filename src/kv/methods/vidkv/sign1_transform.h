// The optional channel transform in front of 1-bit coding (VidKV's FFT over the
// "normal" key channels), as one linear map T from n_coef stored coefficients to n
// channels:  x = T c.  Scores use the adjoint (dot(q, T c) = dot(T^T q, c): the
// query is transformed, never the codes); accumulate adds T y.
//   none:    n_coef = n,  T = I
//   real:    n_coef = n,  T = F^T, F the orthonormal half-spectrum real DFT (nominal budget)
//   complex: n_coef = 2n, c = [Re X, Im X] of the full unnormalized spectrum, T c =
//            Re(IDFT(c)) — the released VidKV code's layout, double the cost
#pragma once

#include <string>
#include <string_view>

#include "kv/methods/vidkv/real_fft.h"
#include "vlkv/status.h"

namespace vlkv::sign1 {

enum class FftMode { kNone, kReal, kComplex };

// "none" | "real" | "complex"; InvalidArgument otherwise (naming the codec spec).
Result<FftMode> parse_fft_mode(std::string_view text, std::string_view codec);
const char* fft_mode_name(FftMode m);

class CoefTransform {
 public:
  CoefTransform(FftMode mode, int n);
  FftMode mode() const { return mode_; }
  int n() const { return n_; }
  int n_coef() const { return mode_ == FftMode::kComplex ? 2 * n_ : n_; }

  // c = coefficients of x.   x: [n], c: [n_coef]
  void analyze(const float* x, float* c) const;
  // x = T c.                 c: [n_coef], x: [n]
  void synthesize(const float* c, float* x) const;
  // qc = T^T q.              q: [n], qc: [n_coef]
  void adjoint(const float* q, float* qc) const;
  // adjoint() of 8 vectors (fft=real: RealFft::forward_batch8): q + l * q_stride [n] ->
  // qc + l * qc_stride [n_coef], l < 8; no alias.
  void adjoint_batch8(const float* q, int64_t q_stride, float* qc, int64_t qc_stride) const;

 private:
  FftMode mode_;
  int n_;
  RealFft fft_;
};

// Shared, never freed; thread-safe. 1 <= n <= RealFft::kMaxN.
const CoefTransform& coef_transform(FftMode mode, int n);

}  // namespace vlkv::sign1
