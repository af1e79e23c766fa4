#include "kernels/vit_ops.h"

#include <cmath>
#include <vector>

#include "base/check.h"
#include "kernels/ops.h"

namespace vlkv {

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
