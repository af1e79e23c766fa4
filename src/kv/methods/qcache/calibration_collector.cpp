#include "kv/methods/qcache/calibration_collector.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"
#include "kv/methods/qcache/calibration.h"

namespace vlkv::calibration {

AttentionMapCollector::AttentionMapCollector(const CollectorShape& shape) : shape_(shape) {
  VLKV_CHECK(shape.n_layers > 0 && shape.n_heads > 0 && shape.n_kv_heads > 0 && shape.head_dim > 0 &&
             shape.n_heads % shape.n_kv_heads == 0 && shape.queries_per_chunk > 0);
  const size_t n_adj = static_cast<size_t>(shape.n_layers - 1);
  sum_.assign(n_adj, 0.0);
  sum_visual_.assign(n_adj, 0.0);
  cnt_.assign(n_adj, 0);
  cnt_visual_.assign(n_adj, 0);
  begin_prompt();
}

void AttentionMapCollector::begin_prompt() {
  keys_.assign(static_cast<size_t>(shape_.n_layers), {});
  kinds_.clear();
  chunk_first_ = 0;
  sampled_.clear();
  prev_maps_.clear();
}

void AttentionMapCollector::attention_map(const float* q, const float* k, int64_t stride, int64_t n_keys,
                                          int head_dim, float scale, float* p) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n_keys; ++j) {
    double dot = 0;
    for (int i = 0; i < head_dim; ++i) dot += static_cast<double>(q[i]) * k[j * stride + i];
    p[j] = static_cast<float>(dot * scale);
    mx = std::max(mx, p[j]);
  }
  double sum = 0;
  for (int64_t j = 0; j < n_keys; ++j) sum += (p[j] = std::exp(p[j] - mx));
  for (int64_t j = 0; j < n_keys; ++j) p[j] = static_cast<float>(p[j] / sum);
}

void AttentionMapCollector::add(int layer, int64_t n, const float* q, const float* k, const TokenKind* kinds) {
  const int d = shape_.head_dim, n_heads = shape_.n_heads, n_kv = shape_.n_kv_heads;
  const int group = n_heads / n_kv;
  const int64_t kv_row = static_cast<int64_t>(n_kv) * d;
  if (layer == 0) {  // a new chunk: its tokens and sampled queries
    chunk_first_ = static_cast<int64_t>(kinds_.size());
    kinds_.insert(kinds_.end(), kinds, kinds + n);
    for (int64_t i = 0; i < n; ++i) saw_visual_ = saw_visual_ || kinds[i] == TokenKind::kVisual;
    sampled_.clear();
    const int64_t m = std::min<int64_t>(n, shape_.queries_per_chunk);
    for (int64_t s = 0; s < m; ++s)  // evenly spaced, the chunk's first and last token included
      sampled_.push_back(chunk_first_ + (m == 1 ? n - 1 : (n - 1) * s / (m - 1)));
    n_queries_ += static_cast<int64_t>(sampled_.size());
  }
  VLKV_CHECK_MSG(static_cast<int64_t>(keys_[layer].size()) == chunk_first_ * kv_row, "layers out of order");
  keys_[layer].insert(keys_[layer].end(), k, k + n * kv_row);

  const int64_t width = chunk_first_ + n;  // keys the chunk's last token sees
  std::vector<float> maps(sampled_.size() * n_heads * width, 0.0f);
  for (size_t s = 0; s < sampled_.size(); ++s) {
    const int64_t t = sampled_[s], local = t - chunk_first_;
    for (int h = 0; h < n_heads; ++h) {
      const int g = h / group;
      attention_map(q + (local * n_heads + h) * d, keys_[layer].data() + g * d, kv_row, t + 1, d, shape_.scale,
                    &maps[(s * n_heads + h) * width]);
    }
  }
  if (layer > 0) {
    for (size_t s = 0; s < sampled_.size(); ++s) {
      const int64_t n_keys = sampled_[s] + 1;
      double whole = 0, visual = 0;
      int n_visual_heads = 0;
      for (int h = 0; h < n_heads; ++h) {
        const MapJsd j = compare_maps(&prev_maps_[(s * n_heads + h) * width], &maps[(s * n_heads + h) * width], n_keys,
                                      kinds_.data());
        whole += j.whole;
        if (j.visual >= 0) {
          visual += j.visual;
          ++n_visual_heads;
        }
      }
      sum_[layer - 1] += whole / n_heads;
      ++cnt_[layer - 1];
      if (n_visual_heads > 0) {
        sum_visual_[layer - 1] += visual / n_visual_heads;
        ++cnt_visual_[layer - 1];
      }
    }
  }
  prev_maps_ = std::move(maps);
}

std::vector<double> AttentionMapCollector::jsd_adjacent() const {
  std::vector<double> out(sum_.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = cnt_[i] ? sum_[i] / cnt_[i] : std::nan("");
  return out;
}

std::vector<double> AttentionMapCollector::jsd_adjacent_visual() const {
  std::vector<double> out(sum_visual_.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = cnt_visual_[i] ? sum_visual_[i] / cnt_visual_[i] : std::nan("");
  return out;
}

}  // namespace vlkv::calibration
