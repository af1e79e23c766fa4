#include "kernels/vit_ops.h"

#include <cmath>
#include <vector>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/ops.h"

namespace vlkv {

void layer_norm(const float* x, const float* weight, const float* bias, int64_t n, float eps, float* out) {
  VLKV_CHECK(n > 0);
  // As ggml_compute_forward_norm_f32: sums in double, mean/variance/scale in float.
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  double sum2 = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] - mean;
    out[i] = v;
    sum2 += static_cast<double>(v * v);
  }
  const float variance = static_cast<float>(sum2 / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(variance + eps);
  for (int64_t i = 0; i < n; ++i) out[i] *= scale;
  if (weight) for (int64_t i = 0; i < n; ++i) out[i] *= weight[i];
  if (bias) for (int64_t i = 0; i < n; ++i) out[i] += bias[i];
}

float gelu_tanh_f32(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

namespace {

// ggml_table_gelu_f16: GELU of every f16 value, stored as f16 (128 KiB, built once).
const std::vector<uint16_t>& gelu_table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(1u << 16);
    for (uint32_t i = 0; i < (1u << 16); ++i) {
      t[i] = fp32_to_fp16(gelu_tanh_f32(fp16_to_fp32(static_cast<uint16_t>(i))));
    }
    return t;
  }();
  return table;
}

}  // namespace

void gelu(const float* x, int64_t n, float* out) {
  const std::vector<uint16_t>& table = gelu_table();
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (v <= -10.0f) out[i] = 0.0f;
    else if (v >= 10.0f) out[i] = v;
    else out[i] = fp16_to_fp32(table[fp32_to_fp16(v)]);
  }
}

void attention_full(const float* q, const float* k, const float* v, int64_t n_tokens, int n_heads, int head_dim,
                    float scale, float* out, ThreadPool& pool) {
  const int64_t row = static_cast<int64_t>(n_heads) * head_dim;  // floats per token
  // One task per (head, query token block); each task owns its scores buffer.
  pool.parallel_for(static_cast<int64_t>(n_heads) * n_tokens, [&](int64_t begin, int64_t end, int) {
    std::vector<float> scores(static_cast<size_t>(n_tokens));  // [n_tokens]
    for (int64_t job = begin; job < end; ++job) {
      const int64_t h = job / n_tokens;
      const int64_t t = job % n_tokens;
      const float* qt = q + t * row + h * head_dim;  // [head_dim]
      for (int64_t s = 0; s < n_tokens; ++s) {
        const float* ks = k + s * row + h * head_dim;
        float dot = 0.0f;
        for (int d = 0; d < head_dim; ++d) dot += qt[d] * ks[d];
        scores[static_cast<size_t>(s)] = dot * scale;
      }
      softmax(scores.data(), n_tokens);
      float* o = out + t * row + h * head_dim;  // [head_dim]
      for (int d = 0; d < head_dim; ++d) o[d] = 0.0f;
      for (int64_t s = 0; s < n_tokens; ++s) {
        const float p = scores[static_cast<size_t>(s)];
        const float* vs = v + s * row + h * head_dim;
        for (int d = 0; d < head_dim; ++d) o[d] += p * vs[d];
      }
    }
  }, /*min_per_thread=*/16);
}

}  // namespace vlkv
