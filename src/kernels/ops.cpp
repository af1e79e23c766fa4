// Elementwise and per-row decoder kernels. Each follows ggml's CPU code step by
// step (same precision of each intermediate) so f32 results agree with llama.cpp.
#include "kernels/ops.h"

#include <cmath>

#include "base/check.h"

namespace vlkv {

void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  VLKV_CHECK(n > 0);
  // As ggml_compute_forward_rms_norm_f32: squares in float, summed in double,
  // mean and scale in float; then ggml_mul by the weight as a separate step.
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p) {
  VLKV_CHECK(p.n_rot > 0 && p.n_rot <= head_dim && p.n_rot % 2 == 0);
  const int n_pairs = p.n_rot / 2;
  // ggml_rope_cache_init: theta starts at the (float) position and is multiplied by
  // theta_scale once per pair; rope_yarn then applies freq_scale (no YaRN ramp here).
  constexpr int kMaxPairs = 512;
  VLKV_CHECK(n_pairs <= kMaxPairs);
  float cos_cache[kMaxPairs];
  float sin_cache[kMaxPairs];
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  float theta_extrap = static_cast<float>(pos);
  for (int i = 0; i < n_pairs; ++i) {
    const float theta = p.freq_scale * theta_extrap;
    cos_cache[i] = std::cos(theta);
    sin_cache[i] = std::sin(theta);
    theta_extrap *= theta_scale;
  }
  // Rotated pair i is (x[2i], x[2i+1]) for kNormal and (x[i], x[i + n_rot/2]) for kNeox.
  const int stride = p.style == RopeStyle::kNormal ? 1 : n_pairs;
  for (int h = 0; h < n_heads; ++h) {
    float* head = x + static_cast<int64_t>(h) * head_dim;  // [head_dim]
    for (int i = 0; i < n_pairs; ++i) {
      const int i0 = p.style == RopeStyle::kNormal ? 2 * i : i;
      const float x0 = head[i0];
      const float x1 = head[i0 + stride];
      head[i0] = x0 * cos_cache[i] - x1 * sin_cache[i];
      head[i0 + stride] = x0 * sin_cache[i] + x1 * cos_cache[i];
    }
    // dims [n_rot, head_dim) pass through unchanged.
  }
}

void softmax(float* x, int64_t n) {
  VLKV_CHECK(n > 0);
  // As ggml_compute_forward_soft_max_f32: exps in float, their sum in double,
  // then one float scale by 1/sum.
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += static_cast<double>(x[i]);
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace vlkv
