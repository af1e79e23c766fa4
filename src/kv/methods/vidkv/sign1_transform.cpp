#include "kv/methods/vidkv/sign1_transform.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "kv/methods/vidkv/choice_param.h"

namespace vlkv::sign1 {

constexpr Choice<FftMode> kFftModes[] = {{"none", FftMode::kNone}, {"real", FftMode::kReal}, {"complex", FftMode::kComplex}};

Result<FftMode> parse_fft_mode(std::string_view text, std::string_view codec) {
  return parse_choice(text, codec, "fft", kFftModes);
}

const char* fft_mode_name(FftMode m) { return choice_name(m, kFftModes); }

CoefTransform::CoefTransform(FftMode mode, int n) : mode_(mode), n_(n), fft_(n) {}

void CoefTransform::analyze(const float* x, float* c) const {
  switch (mode_) {
    case FftMode::kNone: std::memmove(c, x, sizeof(float) * n_); break;
    case FftMode::kReal: fft_.forward(x, c); break;
    case FftMode::kComplex: fft_.complex_forward(x, c, c + n_); break;
  }
}

void CoefTransform::synthesize(const float* c, float* x) const {
  switch (mode_) {
    case FftMode::kNone: std::memmove(x, c, sizeof(float) * n_); break;
    case FftMode::kReal: fft_.inverse(c, x); break;
    case FftMode::kComplex: fft_.complex_inverse_real(c, c + n_, x); break;
  }
}

void CoefTransform::adjoint(const float* q, float* qc) const {
  switch (mode_) {
    case FftMode::kNone: std::memmove(qc, q, sizeof(float) * n_); break;
    case FftMode::kReal: fft_.forward(q, qc); break;  // (F^T)^T = F
    case FftMode::kComplex: {
      fft_.complex_forward(q, qc, qc + n_);
      const float inv = 1.0f / static_cast<float>(n_);
      for (int k = 0; k < 2 * n_; ++k) qc[k] *= inv;
      break;
    }
  }
}

void CoefTransform::adjoint_batch8(const float* q, int64_t q_stride, float* qc, int64_t qc_stride) const {
  if (mode_ == FftMode::kReal) return fft_.forward_batch8(q, q_stride, qc, qc_stride);
  for (int l = 0; l < 8; ++l) adjoint(q + l * q_stride, qc + l * qc_stride);
}

const CoefTransform& coef_transform(FftMode mode, int n) {
  thread_local const CoefTransform* last = nullptr;  // fast path: same transform as the last call
  if (last && last->mode() == mode && last->n() == n) return *last;
  static std::mutex mu;
  static std::map<std::pair<int, int>, std::unique_ptr<CoefTransform>> table;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = table[{static_cast<int>(mode), n}];
  if (!slot) slot = std::make_unique<CoefTransform>(mode, n);
  last = slot.get();
  return *last;
}

}  // namespace vlkv::sign1
