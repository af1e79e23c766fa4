// Q Cache's view of the storage method it wraps: qcache_vla's per-space inner state, and
// the bytes the inner method stores per (layer, kv head), measured by running it, so a
// lazy layer's saving is exact for any inner method.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "kv/kv_bytes.h"
#include "kv/method.h"
#include "kv/page_pool.h"
#include "kv/page_table.h"

namespace vlkv::qcache {

// VLA: the inner method's state and token count per space (0 visual, 1 text).
class PartitionState final : public LayerState {
 public:
  std::unique_ptr<LayerState> clone() const override {
    auto c = std::make_unique<PartitionState>();
    for (int p = 0; p < 2; ++p) {
      if (inner[p]) c->inner[p] = inner[p]->clone();
      c->n_cached[p] = n_cached[p];
    }
    return c;
  }
  bool save(ByteWriter& w) const override {
    for (int p = 0; p < 2; ++p) {
      w.put<int64_t>(n_cached[p]);
      if (inner[p] && !inner[p]->save(w)) return false;
    }
    return true;
  }
  // Each space's inner state is checked against the segments of that space alone.
  bool load(ByteReader& r, const LayerCache* layer) override {
    if (!layer) return false;
    for (int p = 0; p < 2; ++p) {
      n_cached[p] = r.get<int64_t>();
      if (!r.ok() || n_cached[p] < 0 || n_cached[p] > layer->n_tokens) return false;
      LayerCache space;
      space.n_tokens = n_cached[p];
      space.heads.resize(layer->heads.size());
      for (size_t h = 0; h < layer->heads.size(); ++h) {
        int64_t tokens = 0;
        for (const Segment& s : layer->heads[h].segments)
          if (s.space == static_cast<uint32_t>(p + 1)) {
            space.heads[h].segments.push_back(s);
            tokens += s.n_tokens;
          }
        if (tokens != n_cached[p]) return false;
      }
      if (inner[p] && !inner[p]->load(r, &space)) return false;
    }
    return n_cached[0] + n_cached[1] == layer->n_tokens;
  }
  std::unique_ptr<LayerState> inner[2];
  int64_t n_cached[2] = {0, 0};
};

// Bytes of codec blocks (K and V) one (layer, kv head) holds after `inner` stored n tokens
// (one step, visual kinds, zero data): runs the method on a scratch pool.
struct HeadBytes {
  double k = 0, v = 0;
};
inline HeadBytes simulate_head_bytes(const Method& inner, int head_dim, int64_t n) {
  HeadBytes out;
  if (n <= 0) return out;
  const uint64_t budget = std::max<uint64_t>(64ull << 20, static_cast<uint64_t>(n) * head_dim * 16 + (16ull << 20));
  PagePool pool(budget, 64 * 1024);
  LayerCache layer;
  layer.heads.resize(1);
  layer.state = inner.new_layer_state(0);
  PendingStep pending;
  pending.n_new = static_cast<int>(n);
  LayerEditor ed(pool, layer, pending, 0, head_dim);
  std::vector<float> zeros(static_cast<size_t>(n) * head_dim, 0.0f);
  std::vector<TokenKind> kinds(static_cast<size_t>(n), TokenKind::kVisual);
  StoreInput in;
  in.n_new = static_cast<int>(n);
  in.k = zeros.data();
  in.v = zeros.data();
  in.kinds = kinds.data();
  if (!inner.store(in, ed).is_ok()) return out;  // a scratch pool this size does not run out
  for (const Segment& s : layer.heads[0].segments) {
    if (s.k.present()) out.k += static_cast<double>(s.k.block_bytes) * (s.n_tokens / s.k.codec->tokens_per_block());
    out.v += static_cast<double>(s.v.block_bytes) * (s.n_tokens / s.v.codec->tokens_per_block());
  }
  for (PageId p : pending.new_pages) pool.free(p);
  return out;
}

}  // namespace vlkv::qcache
