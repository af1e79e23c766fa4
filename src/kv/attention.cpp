#include "kv/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "base/check.h"

namespace vlkv {
namespace {

constexpr int64_t kChunkTokens = 256;  // keys per scores/accumulate call: logits fit in L1/L2
constexpr int kTileRows = 64;          // query rows (token, head of the GQA group) per task
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A run of cached tokens of one segment: K and V views over the same tokens.
struct Chunk {
  const Codec* kc;
  const Codec* vc;
  SegmentView k, v;
};

void build_chunks(const LayerCache& layer, const LayerCache* key_source, int g, int d, std::vector<Chunk>& out) {
  const auto& segs = layer.heads[g].segments;
  for (size_t i = 0; i < segs.size(); ++i) {
    const Segment& s = segs[i];
    if (s.n_tokens == 0) continue;
    const Stream* ks = &s.k;
    if (!ks->present()) {  // lazy layer: keys of the base layer's matching segment
      VLKV_CHECK_MSG(key_source && i < key_source->heads[g].segments.size() &&
                         key_source->heads[g].segments[i].n_tokens >= s.n_tokens &&
                         key_source->heads[g].segments[i].k.present(),
                     "a segment without K has no matching base-layer segment");
      ks = &key_source->heads[g].segments[i].k;
    }
    const int64_t unit = std::lcm<int64_t>(ks->codec->tokens_per_block(), s.v.codec->tokens_per_block());
    const int64_t step = unit * std::max<int64_t>(1, kChunkTokens / unit);
    for (int64_t t0 = 0; t0 < s.n_tokens; t0 += step) {
      const int64_t n = std::min(step, s.n_tokens - t0);
      out.push_back({ks->codec, s.v.codec, ks->view(t0, n, d), s.v.view(t0, n, d)});
    }
  }
}

// Online-softmax state of the rows of one query tile.
struct RowState {
  float* m;    // [rows] running max of logits
  double* l;   // [rows] running sum of exp(logit - m)
  float* acc;  // [rows, head_dim] running sum of exp(logit - m) * v
};

// Folds one chunk into the state. limit (optional): row r sees chunk keys [0, limit[r]].
//   qt: [rows, head_dim]; logits: scratch [rows, chunk tokens]
void fold_chunk(const Chunk& c, const float* qt, int rows, int d, float scale, const int64_t* limit,
                RowState st, float* logits) {
  const int64_t n = c.k.n_tokens;
  c.kc->scores(qt, rows, c.k, scale, logits, n);
  for (int r = 0; r < rows; ++r) {
    float* lr = logits + r * n;  // [n] logits, then probabilities
    const int64_t valid = limit ? std::clamp<int64_t>(limit[r] + 1, 0, n) : n;
    for (int64_t t = valid; t < n; ++t) lr[t] = 0.0f;
    if (valid == 0) continue;
    float mx = lr[0];
    for (int64_t t = 1; t < valid; ++t) mx = std::max(mx, lr[t]);
    const float m_old = st.m[r];
    const float m_new = std::max(m_old, mx);
    if (m_old != m_new) {
      const float alpha = m_old == kNegInf ? 0.0f : std::exp(m_old - m_new);
      float* a = st.acc + static_cast<int64_t>(r) * d;
      for (int i = 0; i < d; ++i) a[i] *= alpha;
      st.l[r] *= alpha;
      st.m[r] = m_new;
    }
    float sum = 0.0f;
    for (int64_t t = 0; t < valid; ++t) {
      lr[t] = std::exp(lr[t] - m_new);
      sum += lr[t];
    }
    st.l[r] += sum;
  }
  c.vc->accumulate(logits, n, rows, c.v, st.acc);
}

void init_state(RowState st, int rows, int d) {
  std::fill(st.m, st.m + rows, kNegInf);
  std::fill(st.l, st.l + rows, 0.0);
  std::fill(st.acc, st.acc + static_cast<int64_t>(rows) * d, 0.0f);
}

// dst = merge(dst, src), both online-softmax states of the same rows.
void merge_state(RowState dst, RowState src, int rows, int d) {
  for (int r = 0; r < rows; ++r) {
    if (src.m[r] == kNegInf) continue;
    const float m = std::max(dst.m[r], src.m[r]);
    const float a = dst.m[r] == kNegInf ? 0.0f : std::exp(dst.m[r] - m);
    const float b = std::exp(src.m[r] - m);
    float* x = dst.acc + static_cast<int64_t>(r) * d;
    const float* y = src.acc + static_cast<int64_t>(r) * d;
    for (int i = 0; i < d; ++i) x[i] = a * x[i] + b * y[i];
    dst.l[r] = a * dst.l[r] + b * src.l[r];
    dst.m[r] = m;
  }
}

struct Scratch {
  std::vector<float> qt;          // [kTileRows, head_dim]
  std::vector<float> logits;      // [kTileRows, kChunkTokens]
  std::vector<int64_t> limit;     // [kTileRows]
  std::vector<float> m, acc;      // a tile's merged state
  std::vector<double> l;
};

}  // namespace

void attend_layer(const LayerCache& layer, const LayerCache* key_source, const Codec& f32, const float* q,
                  const float* k, const float* v, int n_new, float scale, float* out, const AttendShape& shape,
                  ThreadPool& pool) {
  const int n_kv = shape.n_kv_heads, d = shape.head_dim, n_heads = shape.n_heads;
  const int group = n_heads / n_kv;
  const int tile_tokens = std::max(1, kTileRows / group);
  const int n_tiles = (n_new + tile_tokens - 1) / tile_tokens;
  const int tile_rows = tile_tokens * group;

  std::vector<std::vector<Chunk>> chunks(n_kv);  // [n_kv_heads][chunks]
  size_t max_chunks = 1;
  for (int g = 0; g < n_kv; ++g) {
    build_chunks(layer, key_source, g, d, chunks[g]);
    max_chunks = std::max(max_chunks, chunks[g].size());
  }
  // Split the cached chunks when heads x tiles alone cannot keep the threads busy (decode).
  const int64_t want = 2 * static_cast<int64_t>(pool.n_threads());
  int64_t n_splits = std::clamp<int64_t>((want + n_kv * n_tiles - 1) / (n_kv * n_tiles), 1,
                                         static_cast<int64_t>(max_chunks));
  if (pool.n_threads() == 1) n_splits = 1;
  const int64_t n_tasks = static_cast<int64_t>(n_kv) * n_tiles * n_splits;

  // Partial states of phase A: [n_tasks, tile_rows] (+ head_dim for acc).
  std::vector<float> part_m(n_tasks * tile_rows);
  std::vector<double> part_l(n_tasks * tile_rows);
  std::vector<float> part_acc(n_tasks * tile_rows * d);
  auto part = [&](int64_t task) {
    return RowState{part_m.data() + task * tile_rows, part_l.data() + task * tile_rows,
                    part_acc.data() + task * tile_rows * d};
  };
  // Rows of tile `tile` of kv head g: row r = (token tile*tile_tokens + r / group, head g*group + r % group).
  auto tile_size = [&](int tile) { return std::min(tile_tokens, n_new - tile * tile_tokens) * group; };
  auto gather_q = [&](int g, int tile, float* qt) {
    const int rows = tile_size(tile);
    for (int r = 0; r < rows; ++r) {
      const int64_t i = static_cast<int64_t>(tile) * tile_tokens + r / group;
      std::memcpy(qt + static_cast<int64_t>(r) * d, q + (i * n_heads + g * group + r % group) * d, sizeof(float) * d);
    }
  };
  thread_local Scratch scratch;
  auto prepare = [&](Scratch& s) {
    s.qt.resize(static_cast<size_t>(tile_rows) * d);
    s.logits.resize(static_cast<size_t>(tile_rows) * kChunkTokens);
    s.limit.resize(tile_rows);
    s.m.resize(tile_rows);
    s.l.resize(tile_rows);
    s.acc.resize(static_cast<size_t>(tile_rows) * d);
  };

  // Phase A: cached chunks, task = (kv head, tile, split).
  pool.parallel_for(n_tasks, [&](int64_t begin, int64_t end, int) {
    Scratch& s = scratch;
    prepare(s);
    for (int64_t task = begin; task < end; ++task) {
      const int split = static_cast<int>(task % n_splits);
      const int tile = static_cast<int>(task / n_splits % n_tiles);
      const int g = static_cast<int>(task / n_splits / n_tiles);
      const int rows = tile_size(tile);
      RowState st = part(task);
      init_state(st, rows, d);
      const auto& cs = chunks[g];
      const size_t c0 = cs.size() * split / n_splits, c1 = cs.size() * (split + 1) / n_splits;
      if (c0 == c1) continue;
      gather_q(g, tile, s.qt.data());
      for (size_t c = c0; c < c1; ++c) fold_chunk(cs[c], s.qt.data(), rows, d, scale, nullptr, st, s.logits.data());
    }
  });

  // New tokens' K/V per kv head, contiguous: [n_kv_heads, n_new, head_dim].
  std::vector<float> kn(static_cast<size_t>(n_kv) * n_new * d), vn(kn.size());
  for (int64_t i = 0; i < n_new; ++i)
    for (int g = 0; g < n_kv; ++g) {
      std::memcpy(&kn[(g * static_cast<int64_t>(n_new) + i) * d], k + (i * n_kv + g) * d, sizeof(float) * d);
      std::memcpy(&vn[(g * static_cast<int64_t>(n_new) + i) * d], v + (i * n_kv + g) * d, sizeof(float) * d);
    }

  // Phase B: task = (kv head, tile): merge splits, add the causal new tokens, normalize.
  pool.parallel_for(static_cast<int64_t>(n_kv) * n_tiles, [&](int64_t begin, int64_t end, int) {
    Scratch& s = scratch;
    prepare(s);
    for (int64_t task = begin; task < end; ++task) {
      const int tile = static_cast<int>(task % n_tiles), g = static_cast<int>(task / n_tiles);
      const int rows = tile_size(tile);
      RowState st{s.m.data(), s.l.data(), s.acc.data()};
      init_state(st, rows, d);
      for (int64_t sp = 0; sp < n_splits; ++sp) merge_state(st, part(task * n_splits + sp), rows, d);
      gather_q(g, tile, s.qt.data());
      // The new tokens of head g as a one-page f32 segment.
      const uint8_t* page[1] = {reinterpret_cast<const uint8_t*>(&kn[static_cast<size_t>(g) * n_new * d])};
      const uint8_t* vpage[1] = {reinterpret_cast<const uint8_t*>(&vn[static_cast<size_t>(g) * n_new * d])};
      const int64_t first_tok = static_cast<int64_t>(tile) * tile_tokens;
      const int64_t last_tok = first_tok + rows / group - 1;
      for (int64_t j0 = 0; j0 <= last_tok; j0 += kChunkTokens) {
        const int64_t n = std::min<int64_t>(kChunkTokens, last_tok + 1 - j0);
        Chunk c{&f32, &f32, {}, {}};
        c.k.pages = page;
        c.k.first_block = j0;
        c.k.n_tokens = n;
        c.k.blocks_per_page = n_new;
        c.k.block_bytes = 4 * d;
        c.k.tokens_per_block = 1;
        c.k.head_dim = d;
        c.v = c.k;
        c.v.pages = vpage;
        for (int r = 0; r < rows; ++r) s.limit[r] = first_tok + r / group - j0;  // causal: key j <= token i
        fold_chunk(c, s.qt.data(), rows, d, scale, s.limit.data(), st, s.logits.data());
      }
      for (int r = 0; r < rows; ++r) {
        const int64_t i = first_tok + r / group;
        float* o = out + (i * n_heads + g * group + r % group) * d;
        const float inv = static_cast<float>(1.0 / st.l[r]);
        for (int x = 0; x < d; ++x) o[x] = st.acc[static_cast<int64_t>(r) * d + x] * inv;
      }
    }
  });
}

}  // namespace vlkv
