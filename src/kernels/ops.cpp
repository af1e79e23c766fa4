// Elementwise and per-row decoder kernels. Each follows ggml's CPU code step by
// step (same precision of each intermediate) so f32 results agree with llama.cpp.
#include "kernels/ops.h"

#include <cmath>
#include <vector>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/f16_table_lookup.h"

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
  for (int64_t i = 0; i < n; ++i) out[i] = swiglu_one(gate[i], up[i]);
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

namespace {

constexpr int kMaxRopePairs = 512;

// The frequency ladder of one position, as ggml_rope_cache_init builds it: theta starts
// at the (float) position and is multiplied by theta_scale once per pair.
inline float next_theta(float& theta, float theta_scale) {
  const float t = theta;
  theta *= theta_scale;
  return t;
}

// M-RoPE's four sections (t, h, w, extra) as cumulative bounds over the pairs.
struct RopeSections {
  int s0, s01, s012, dims;
  explicit RopeSections(const int s[4]) : s0(s[0]), s01(s[0] + s[1]), s012(s01 + s[2]), dims(s012 + s[3]) {
    VLKV_CHECK(s[0] >= 0 && s[1] >= 0 && s[2] >= 0 && s[3] >= 0 && dims > 0);
  }
  // The section of sector (< dims) when sections are contiguous ranges.
  int of(int sector) const { return sector < s0 ? 0 : sector < s01 ? 1 : sector < s012 ? 2 : 3; }
};

// Rotates pairs (i, i + n_pairs), i < n_pairs, of every head by the cached angles: the NeoX
// order both multi-section ropes use; dims [2 n_pairs, head_dim) pass through.
void rotate_halves(float* x, int n_heads, int head_dim, int n_pairs, const float* cos_cache, const float* sin_cache) {
  for (int h = 0; h < n_heads; ++h) {
    float* head = x + static_cast<int64_t>(h) * head_dim;  // [head_dim]
    for (int i = 0; i < n_pairs; ++i) {
      const float x0 = head[i];
      const float x1 = head[i + n_pairs];
      head[i] = x0 * cos_cache[i] - x1 * sin_cache[i];
      head[i + n_pairs] = x0 * sin_cache[i] + x1 * cos_cache[i];
    }
  }
}

}  // namespace

void rope_multi(float* x, int n_heads, int head_dim, const int64_t pos[4], const int sections[4], const RopeParams& p,
                bool interleaved) {
  VLKV_CHECK(p.n_rot > 0 && p.n_rot <= head_dim && p.n_rot % 2 == 0);
  const int n_pairs = p.n_rot / 2;
  VLKV_CHECK(n_pairs <= kMaxRopePairs);
  const RopeSections sect(sections);
  // As ggml_mrope_cache_init (not vision): the four ladders advance together, each
  // pair picks the one of its sector; rope_yarn then applies freq_scale.
  float cos_cache[kMaxRopePairs];
  float sin_cache[kMaxRopePairs];
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  float th[4] = {static_cast<float>(pos[0]), static_cast<float>(pos[1]), static_cast<float>(pos[2]),
                 static_cast<float>(pos[3])};
  for (int i = 0; i < n_pairs; ++i) {
    const int sector = i % sect.dims;
    int which = sect.of(sector);
    if (interleaved) {
      const int r = sector % 3;
      which = r == 1 && sector < 3 * sections[1]   ? 1
              : r == 2 && sector < 3 * sections[2] ? 2
              : r == 0 && sector < 3 * sections[0] ? 0
                                                   : 3;
    }
    const float theta = p.freq_scale * th[which];
    cos_cache[i] = std::cos(theta);
    sin_cache[i] = std::sin(theta);
    for (float& t : th) next_theta(t, theta_scale);
  }
  rotate_halves(x, n_heads, head_dim, n_pairs, cos_cache, sin_cache);
}

void rope_vision(float* x, int n_heads, int head_dim, const int64_t pos[4], const int sections[4], float freq_base) {
  VLKV_CHECK(head_dim > 0 && head_dim % 4 == 0);
  const int n_rot = head_dim / 2;   // ggml's n_dims for the vision mode
  const int n_pairs = head_dim / 2;  // every dimension rotates: pairs (i, i + n_rot)
  VLKV_CHECK(n_pairs <= kMaxRopePairs);
  const RopeSections sect(sections);
  float cos_cache[kMaxRopePairs];
  float sin_cache[kMaxRopePairs];
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  float th[4] = {0, 0, 0, 0};
  for (int i = 0; i < n_pairs; ++i) {
    const int sector = i % sect.dims;
    // Independent sections: a ladder restarts at its position where its section begins.
    if (sector == 0) th[0] = static_cast<float>(pos[0]);
    if (sector == sect.s0) th[1] = static_cast<float>(pos[1]);
    if (sector == sect.s01) th[2] = static_cast<float>(pos[2]);
    if (sector == sect.s012) th[3] = static_cast<float>(pos[3]);
    const int which = sect.of(sector);
    cos_cache[i] = std::cos(th[which]);
    sin_cache[i] = std::sin(th[which]);
    for (float& t : th) next_theta(t, theta_scale);
  }
  rotate_halves(x, n_heads, head_dim, n_rot, cos_cache, sin_cache);
}

void layer_norm(const float* x, const float* weight, const float* bias, int64_t n, float eps, float* out) {
  VLKV_CHECK(n > 0);
  // As ggml_compute_forward_norm_f32: the sum in double, mean in float; centred squares
  // in float summed in double; one float scale; then ggml_mul and ggml_add as separate steps.
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]);
  const float mean = static_cast<float>(sum) / static_cast<float>(n);
  double sum2 = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float d = x[i] - mean;
    out[i] = d;
    sum2 += static_cast<double>(d * d);
  }
  const float variance = static_cast<float>(sum2 / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(variance + eps);
  for (int64_t i = 0; i < n; ++i) {
    float y = out[i] * scale;
    if (weight) y = y * weight[i];
    if (bias) y = y + bias[i];
    out[i] = y;
  }
}

namespace {

constexpr float kGeluCoefA = 0.044715f;
constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
constexpr float kGeluQuickCoef = -1.702f;

inline float gelu_f32(float x) { return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kGeluCoefA * x * x))); }
inline float gelu_quick_f32(float x) { return x * (1.0f / (1.0f + std::exp(kGeluQuickCoef * x))); }

// f16-indexed tables of f16-rounded results, as ggml builds ggml_table_gelu_f16 and
// ggml_table_gelu_quick_f16 at init (stored here as the floats those f16 values are).
struct ActivationTables {
  std::vector<float> gelu, gelu_quick;  // [65536] indexed by the f16 bits of x
  ActivationTables() : gelu(65536), gelu_quick(65536) {
    for (uint32_t i = 0; i < 65536; ++i) {
      const float v = fp16_to_fp32(static_cast<uint16_t>(i));
      gelu[i] = fp16_to_fp32(fp32_to_fp16(gelu_f32(v)));
      gelu_quick[i] = fp16_to_fp32(fp32_to_fp16(gelu_quick_f32(v)));
    }
  }
};

const ActivationTables& activation_tables() {
  static const ActivationTables tables;  // thread-safe one-time init
  return tables;
}

}  // namespace

void gelu(const float* x, int64_t n, float* out) {
  f16_table_lookup(activation_tables().gelu.data(), x, n, out, /*gelu_clamp=*/true);
}

void gelu_exact(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_f32(x[i]);
}

void gelu_quick(const float* x, int64_t n, float* out) {
  f16_table_lookup(activation_tables().gelu_quick.data(), x, n, out, /*gelu_clamp=*/false);
}

void gelu_quick_exact(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_quick_f32(x[i]);
}

}  // namespace vlkv
