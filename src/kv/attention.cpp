#include "kv/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "base/check.h"
#include "base/cpu_features.h"
#include "base/simd_dispatch.h"
#include "kv/attention_chunks.h"
#include "kv/softmax_kernels.h"

namespace vlkv {
namespace attn {

void build_chunks(const LayerCache& layer, const LayerCache* key_source, int g, int d, std::vector<Chunk>& out) {
  const auto& segs = layer.heads[g].segments;
  int64_t first = 0;  // storage index of the segment's first token
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
    auto emit = [&](int64_t t0, int64_t n) {
      out.push_back({ks->codec, s.v.codec, ks->view(t0, n, d), s.v.view(t0, n, d), first + t0, ks != &s.k});
    };
    if (ks->n_freed_pages == 0 && s.v.n_freed_pages == 0) {
      for (int64_t t0 = 0; t0 < s.n_tokens; t0 += step) emit(t0, std::min(step, s.n_tokens - t0));
    } else {  // pages freed (tokens out of a sliding window): chunks cover the held units only
      auto held = [&](int64_t t) { return ks->live(t, unit) && s.v.live(t, unit); };
      int64_t t = 0;
      while (t < s.n_tokens) {
        if (!held(t)) {  // skip the freed page of the first stream that lacks one
          const Stream& gone = ks->live(t, unit) ? s.v : *ks;
          const int64_t tpp = gone.tokens_per_page();
          int64_t next = t + unit;
          for (int64_t p = t / tpp; p <= (t + unit - 1) / tpp; ++p)
            if (gone.pages[static_cast<size_t>(p)] == kNoPage) next = std::max(next, ((p + 1) * tpp + unit - 1) / unit * unit);
          t = next;
          continue;
        }
        int64_t t1 = t + unit;
        while (t1 < s.n_tokens && t1 - t < step && held(t1)) t1 += unit;
        emit(t, t1 - t);
        t = t1;
      }
    }
    first += s.n_tokens;
  }
}

Chunk f32_rows_chunk(const Codec& f32, const uint8_t* const* kpage, const uint8_t* const* vpage, int64_t first,
                     int64_t n, int64_t rows_in_page, int d) {
  Chunk c{&f32, &f32, {}, {}, first};
  c.k.pages = kpage;
  c.k.first_block = first;
  c.k.n_tokens = n;
  c.k.blocks_per_page = static_cast<int32_t>(rows_in_page);
  c.k.block_bytes = 4 * d;
  c.k.tokens_per_block = 1;
  c.k.head_dim = d;
  c.v = c.k;
  c.v.pages = vpage;
  return c;
}

Chunk sub_chunk(const Chunk& c, int64_t t0, int64_t n) {
  Chunk s = c;
  s.k.first_block += t0 / c.k.tokens_per_block;
  s.k.n_tokens = n;
  s.v.first_block += t0 / c.v.tokens_per_block;
  s.v.n_tokens = n;
  s.first += t0;
  return s;
}

int64_t sparse_granule(const Chunk& c) {
  const int64_t unit = std::lcm<int64_t>(c.kc->tokens_per_block(), c.vc->tokens_per_block());
  return unit * ((kSparseGranule + unit - 1) / unit);
}

// ---------------- softmax over one chunk of logits (vectorized exp) ----------------
// One dispatch point (base/simd_dispatch.h): the AVX2 and AVX-512 variants live in
// softmax_kernels_avx2.cpp / softmax_kernels_avx512.cpp.
namespace {
float exp_sub_sum_scalar(float* x, int64_t n, float m) {
  float sum = 0.0f;
  for (int64_t t = 0; t < n; ++t) sum += (x[t] = std::exp(x[t] - m));
  return sum;
}
float max_scalar(const float* x, int64_t n) {
  float mx = x[0];
  for (int64_t t = 1; t < n; ++t) mx = std::max(mx, x[t]);
  return mx;
}


const SoftmaxKernels& softmax_kernels() {
  static const SoftmaxKernels kScalar{exp_sub_sum_scalar, max_scalar};
  static const SimdTable<SoftmaxKernels> table(&kScalar, &kSoftmaxKernelsAvx2, nullptr, &kSoftmaxKernelsAvx512, nullptr);
  return table.get();
}

}  // namespace

float exp_sub_sum(float* x, int64_t n, float m) { return softmax_kernels().exp_sub_sum(x, n, m); }
float max_of(const float* x, int64_t n) { return softmax_kernels().max(x, n); }

}  // namespace attn

namespace {

using attn::build_chunks;
using attn::Chunk;
using attn::exp_sub_sum;
using attn::kChunkTokens;
using attn::kNegInf;
using attn::kTileRows;
using attn::max_of;

// Online-softmax state of the rows of one query tile.
struct RowState {
  float* m;    // [rows] running max of logits
  double* l;   // [rows] running sum of exp(logit - m)
  float* acc;  // [rows, head_dim] running sum of exp(logit - m) * v
  float* acc2 = nullptr;  // [rows, head_dim] the same for values stored in a rotated basis
                          // (Codec::output_transform), un-rotated once at the end; null if none
};

// Which keys of a chunk each row of a fold sees (every field optional).
struct FoldMask {
  const int64_t* first = nullptr;  // [rows] row r sees chunk keys t >= first[r]
  const int64_t* limit = nullptr;  // [rows] row r sees chunk keys t <= limit[r]
  const uint8_t* keep = nullptr;   // [chunk tokens] keys marked 0 get probability 0 (sparse attention)
  // Sliding window (AttendOptions::window): row r masks the key at position pk when
  // qpos[r] - pk >= window; pk = head_pos[c.first + t] (storage index -> position), or
  // c.first + t when head_pos is null (storage order is sequence order).
  int64_t window = 0;
  const int64_t* qpos = nullptr;      // [rows]
  const int64_t* head_pos = nullptr;  // [the kv head's cached tokens]
};

// Folds one chunk into the state; masked keys get probability 0.
//   qt: [rows, head_dim]; logits: scratch [rows, chunk tokens]
void fold_chunk(const Chunk& c, const float* qt, int rows, int d, float scale, const FoldMask& mk, RowState st,
                float* logits) {
  const int64_t n = c.k.n_tokens;
  c.kc->scores(qt, rows, c.k, scale, logits, n);
  const bool win_pos = mk.window > 0 && mk.head_pos;  // out-of-order keys: masked one by one
  for (int r = 0; r < rows; ++r) {
    float* lr = logits + r * n;  // [n] logits, then probabilities
    const int64_t valid = mk.limit ? std::clamp<int64_t>(mk.limit[r] + 1, 0, n) : n;
    int64_t lo = mk.first ? std::clamp<int64_t>(mk.first[r], 0, valid) : 0;
    if (mk.window > 0 && !mk.head_pos)  // in-order keys: the window is a lower bound
      lo = std::clamp<int64_t>(mk.qpos[r] - mk.window + 1 - c.first, lo, valid);
    for (int64_t t = valid; t < n; ++t) lr[t] = 0.0f;
    for (int64_t t = 0; t < lo; ++t) lr[t] = 0.0f;
    if (valid == lo) continue;
    float* lw = lr + lo;  // [m] the row's candidate keys
    const uint8_t* kw = mk.keep ? mk.keep + lo : nullptr;
    const int64_t m = valid - lo;
    auto out_of_window = [&](int64_t t) { return mk.qpos[r] - mk.head_pos[c.first + lo + t] >= mk.window; };
    if (kw)  // branch-free selects, vectorizable (the branchy stores showed in sparse prefill profiles)
      for (int64_t t = 0; t < m; ++t) lw[t] = kw[t] ? lw[t] : kNegInf;
    if (win_pos)
      for (int64_t t = 0; t < m; ++t) lw[t] = out_of_window(t) ? kNegInf : lw[t];
    const float mx = max_of(lw, m);
    if (mx == kNegInf) {  // nothing kept in this row's range
      std::fill(lw, lw + m, 0.0f);
      continue;
    }
    const float m_old = st.m[r];
    const float m_new = std::max(m_old, mx);
    if (m_old != m_new) {
      const float alpha = m_old == kNegInf ? 0.0f : std::exp(m_old - m_new);
      float* a = st.acc + static_cast<int64_t>(r) * d;
      for (int i = 0; i < d; ++i) a[i] *= alpha;
      if (st.acc2)
        for (int i = 0; i < d; ++i) st.acc2[static_cast<int64_t>(r) * d + i] *= alpha;
      st.l[r] *= alpha;
      st.m[r] = m_new;
    }
    st.l[r] += exp_sub_sum(lw, m, m_new);
    // the vector exp flushes -inf to ~1e-38, not 0
    if (kw)
      for (int64_t t = 0; t < m; ++t) lw[t] = kw[t] ? lw[t] : 0.0f;
    if (win_pos)
      for (int64_t t = 0; t < m; ++t) lw[t] = out_of_window(t) ? 0.0f : lw[t];
  }
  c.vc->accumulate(logits, n, rows, c.v, c.vc->output_transform() ? st.acc2 : st.acc);
}

void init_state(RowState st, int rows, int d) {
  std::fill(st.m, st.m + rows, kNegInf);
  std::fill(st.l, st.l + rows, 0.0);
  std::fill(st.acc, st.acc + static_cast<int64_t>(rows) * d, 0.0f);
  if (st.acc2) std::fill(st.acc2, st.acc2 + static_cast<int64_t>(rows) * d, 0.0f);
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
    if (dst.acc2) {
      float* x2 = dst.acc2 + static_cast<int64_t>(r) * d;
      const float* y2 = src.acc2 + static_cast<int64_t>(r) * d;
      for (int i = 0; i < d; ++i) x2[i] = a * x2[i] + b * y2[i];
    }
    dst.l[r] = a * dst.l[r] + b * src.l[r];
    dst.m[r] = m;
  }
}

struct Scratch {
  std::vector<float> qt;          // [kTileRows, head_dim]
  std::vector<float> qt2;         // [kTileRows, head_dim] qt through a codec's query transform
  std::vector<float> qb;          // [kTileRows, head_dim] the base layer's queries (Q Cache VLA)
  std::vector<float> acc2;        // [kTileRows, head_dim] merged rotated-basis accumulator
  std::vector<float> logits;      // [kTileRows, longest chunk (kChunkTokens or a codec block)]
  std::vector<int64_t> limit;     // [kTileRows]
  std::vector<int64_t> row_last;  // [kTileRows] last gathered new key each row sees
  std::vector<int64_t> first;     // [kTileRows] first gathered new key each row sees (window)
  std::vector<int64_t> row_first; // [kTileRows]
  std::vector<int64_t> qpos;      // [kTileRows] sequence position of each row's query
  std::vector<float> m, acc;      // a tile's merged state
  std::vector<double> l;
};

// The calling thread's Scratch. A block-scope thread_local is constructed, and its destructor
// registered, only in a thread that runs its declaration: declared in attend_layer and named
// in a pool task, the workers' copies were used unconstructed and their buffers leaked at exit.
Scratch& thread_scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

void attend_layer(const LayerCache& layer, const LayerCache* key_source, const Codec& f32, const float* q,
                  const float* k, const float* v, int n_new, float scale, float* out, const AttendShape& shape,
                  ThreadPool& pool, const AttendOptions& options) {
  const int n_kv = shape.n_kv_heads, d = shape.head_dim, n_heads = shape.n_heads;
  const int group = n_heads / n_kv;
  const int tile_tokens = std::max(1, kTileRows / group);
  const int n_tiles = (n_new + tile_tokens - 1) / tile_tokens;
  const int tile_rows = tile_tokens * group;
  const bool sparse = options.keep != nullptr;
  const bool vla = options.base_q != nullptr;  // Q Cache VLA: base-layer scores for base keys
  VLKV_CHECK_MSG(!vla || (!sparse && options.base_k && options.from_base), "VLA needs base_k, from_base, no sparsity");
  const int64_t n_keys = layer.n_tokens + n_new;  // step key order: cached (storage order), then new
  const bool windowed = options.window > 0;

  // Per-step buffers of the calling thread, reused across steps (no allocation once warm).
  struct StepBuffers {
    std::vector<Chunk> chunks;        // every kv head's chunks, head after head
    std::vector<size_t> head_begin;   // [n_kv + 1] offsets into chunks
    std::vector<double> cost;         // [chunks + n_kv] per head: prefix sums of chunk bytes
    std::vector<float> part_m, part_acc, part_acc2, kn, vn;
    std::vector<double> part_l;
    std::vector<int> kept_new;  // [n_kv, n_new] sparse: step indices of each head's kept new tokens
    std::vector<int> n_kept_new;  // [n_kv]
    std::vector<float> kb, vb;      // [n_kv, n_new, head_dim] VLA: new tokens with base keys
    std::vector<int> vla_idx;       // [n_kv, 2, n_new] VLA: step indices of own / base new tokens
    std::vector<int> vla_n;         // [n_kv, 2]
  };
  thread_local StepBuffers tls_buf;
  StepBuffers& buf = tls_buf;  // the caller's: the tasks below run on worker threads too
  buf.chunks.clear();
  buf.head_begin.assign(1, 0);
  buf.cost.clear();
  size_t max_chunks = 1;
  int64_t max_chunk_tokens = kChunkTokens;  // codecs with blocks over 256 tokens make longer chunks
  const Codec* out_rot = nullptr;  // the value codec whose output transform acc2 undoes
  for (int g = 0; g < n_kv; ++g) {
    const size_t first = buf.chunks.size();
    build_chunks(layer, key_source, g, d, buf.chunks);
    buf.head_begin.push_back(buf.chunks.size());
    max_chunks = std::max(max_chunks, buf.chunks.size() - first);
    buf.cost.push_back(0.0);  // cost[head_begin[g] + g + i]: bytes of the head's chunks before chunk i
    for (size_t c = first; c < buf.chunks.size(); ++c) {
      const Chunk& ch = buf.chunks[c];
      max_chunk_tokens = std::max(max_chunk_tokens, ch.k.n_tokens);
      buf.cost.push_back(buf.cost.back() +
                         static_cast<double>(ch.k.n_blocks()) * ch.k.block_bytes +
                         static_cast<double>(ch.v.n_blocks()) * ch.v.block_bytes + 64.0);
      if (!ch.vc->output_transform()) continue;
      VLKV_CHECK_MSG(!out_rot || out_rot->output_transform() == ch.vc->output_transform(),
                     "one layer mixes two different value output transforms");
      out_rot = ch.vc;
    }
  }
  // Split the cached chunks when heads x tiles alone cannot keep the threads busy (decode).
  const int64_t want = 2 * static_cast<int64_t>(pool.n_threads());
  int64_t n_splits = std::clamp<int64_t>((want + n_kv * n_tiles - 1) / (n_kv * n_tiles), 1,
                                         static_cast<int64_t>(max_chunks));
  if (pool.n_threads() == 1) n_splits = 1;
  const int64_t n_tasks = static_cast<int64_t>(n_kv) * n_tiles * n_splits;
  // Chunks [split_begin(g, sp), split_begin(g, sp + 1)) of head g: equal shares of its bytes.
  auto split_begin = [&](int g, int64_t sp) -> size_t {
    const size_t b = buf.head_begin[g], e = buf.head_begin[g + 1];
    if (sp <= 0) return b;
    if (sp >= n_splits) return e;
    const double* c = buf.cost.data() + b + g;  // [e - b + 1] prefix sums
    const double target = c[e - b] * static_cast<double>(sp) / static_cast<double>(n_splits);
    return b + static_cast<size_t>(std::lower_bound(c, c + (e - b), target) - c);
  };

  // Partial states of phase A: [n_tasks, tile_rows] (+ head_dim for acc).
  buf.part_m.resize(n_tasks * tile_rows);
  buf.part_l.resize(n_tasks * tile_rows);
  buf.part_acc.resize(n_tasks * tile_rows * d);
  if (out_rot) buf.part_acc2.resize(n_tasks * tile_rows * d);
  float* const part_m = buf.part_m.data();
  double* const part_l = buf.part_l.data();
  float* const part_acc = buf.part_acc.data();
  float* const part_acc2 = buf.part_acc2.data();
  auto part = [&](int64_t task) {
    return RowState{part_m + task * tile_rows, part_l + task * tile_rows, part_acc + task * tile_rows * d,
                    out_rot ? part_acc2 + task * tile_rows * d : nullptr};
  };
  // Rows of tile `tile` of kv head g: row r = (token tile*tile_tokens + r / group, head g*group + r % group).
  auto tile_size = [&](int tile) { return std::min(tile_tokens, n_new - tile * tile_tokens) * group; };
  auto gather_q = [&](int g, int tile, float* qt, const float* q_src = nullptr) {
    const float* qs = q_src ? q_src : q;
    const int rows = tile_size(tile);
    for (int r = 0; r < rows; ++r) {
      const int64_t i = static_cast<int64_t>(tile) * tile_tokens + r / group;
      std::memcpy(qt + static_cast<int64_t>(r) * d, qs + (i * n_heads + g * group + r % group) * d, sizeof(float) * d);
    }
  };
  auto prepare = [&](Scratch& s) {
    s.qt.resize(static_cast<size_t>(tile_rows) * d);
    if (vla) s.qb.resize(static_cast<size_t>(tile_rows) * d);
    s.logits.resize(static_cast<size_t>(tile_rows) * max_chunk_tokens);
    s.limit.resize(tile_rows);
    s.row_last.resize(tile_rows);
    s.first.resize(tile_rows);
    s.row_first.resize(tile_rows);
    s.qpos.resize(tile_rows);
    s.m.resize(tile_rows);
    s.l.resize(tile_rows);
    s.acc.resize(static_cast<size_t>(tile_rows) * d);
    if (out_rot) s.acc2.resize(static_cast<size_t>(tile_rows) * d);
  };

  // Phase A: cached chunks, task = (kv head, tile, split).
  pool.parallel_for(n_tasks, [&](int64_t begin, int64_t end, int) {
    Scratch& s = thread_scratch();
    prepare(s);
    for (int64_t task = begin; task < end; ++task) {
      const int split = static_cast<int>(task % n_splits);
      const int tile = static_cast<int>(task / n_splits % n_tiles);
      const int g = static_cast<int>(task / n_splits / n_tiles);
      const int rows = tile_size(tile);
      RowState st = part(task);
      init_state(st, rows, d);
      const Chunk* cs = buf.chunks.data();
      const size_t c0 = split_begin(g, split), c1 = split_begin(g, split + 1);
      if (c0 == c1) continue;
      gather_q(g, tile, s.qt.data());
      if (vla) gather_q(g, tile, s.qb.data(), options.base_q);
      FoldMask mk;
      const int64_t* head_pos = options.cached_pos ? options.cached_pos + g * layer.n_tokens : nullptr;
      if (windowed) {
        for (int r = 0; r < rows; ++r) s.qpos[r] = layer.n_tokens + static_cast<int64_t>(tile) * tile_tokens + r / group;
        mk.window = options.window;
        mk.qpos = s.qpos.data();
        mk.head_pos = head_pos;
      }
      int qt2_id = 0;  // query transform held in s.qt2: applied once per task, not per chunk
      bool qt2_base = false;  // s.qt2 holds the base layer's queries
      for (size_t c = c0; c < c1; ++c) {
        const uint8_t* keep_c = sparse ? options.keep + g * n_keys + cs[c].first : nullptr;
        if (sparse && std::find(keep_c, keep_c + cs[c].k.n_tokens, uint8_t{1}) == keep_c + cs[c].k.n_tokens) continue;
        if (windowed) {  // a chunk every row's window has left is not read (decode reads ~window keys)
          int64_t newest = cs[c].first + cs[c].k.n_tokens - 1;
          if (head_pos) newest = *std::max_element(head_pos + cs[c].first, head_pos + cs[c].first + cs[c].k.n_tokens);
          if (s.qpos[0] - newest >= options.window) continue;
        }
        const bool base = vla && cs[c].base_keys;
        const std::vector<float>& q_tile = base ? s.qb : s.qt;
        const float* qc = q_tile.data();
        if (const int id = cs[c].kc->query_transform()) {
          if (id != qt2_id || base != qt2_base) {
            s.qt2.assign(q_tile.begin(), q_tile.begin() + static_cast<int64_t>(rows) * d);
            cs[c].kc->transform_query(s.qt2.data(), rows, d);
            qt2_id = id;
            qt2_base = base;
          }
          qc = s.qt2.data();
        }
        if (!sparse) {
          fold_chunk(cs[c], qc, rows, d, scale, mk, st, s.logits.data());
          continue;
        }
        attn::for_each_kept_run(cs[c], keep_c, [&](int64_t t0, int64_t n) {
          FoldMask mk_run = mk;
          mk_run.keep = keep_c + t0;
          fold_chunk(attn::sub_chunk(cs[c], t0, n), qc, rows, d, scale, mk_run, st, s.logits.data());
        });
      }
    }
  });

  // New tokens' K/V per kv head, contiguous: [n_kv_heads, n_new, head_dim].
  buf.kn.resize(static_cast<size_t>(n_kv) * n_new * d);
  buf.vn.resize(buf.kn.size());
  float* const kn = buf.kn.data();
  float* const vn = buf.vn.data();
  for (int64_t i = 0; i < n_new; ++i)
    for (int g = 0; g < n_kv; ++g) {
      std::memcpy(&kn[(g * static_cast<int64_t>(n_new) + i) * d], k + (i * n_kv + g) * d, sizeof(float) * d);
      std::memcpy(&vn[(g * static_cast<int64_t>(n_new) + i) * d], v + (i * n_kv + g) * d, sizeof(float) * d);
    }
  // VLA: each head's new tokens split into own (text) rows, gathered to the front of kn/vn,
  // and base rows (keys base_k, scored with base_q) in kb/vb; idx lists their step indices.
  if (vla) {
    buf.kb.resize(buf.kn.size());
    buf.vb.resize(buf.kn.size());
    buf.vla_idx.resize(2 * static_cast<size_t>(n_kv) * n_new);
    buf.vla_n.assign(2 * static_cast<size_t>(n_kv), 0);
    for (int g = 0; g < n_kv; ++g) {
      int* own = &buf.vla_idx[2 * static_cast<size_t>(g) * n_new];
      int* base = own + n_new;
      int n_own = 0, n_base = 0;
      for (int i = 0; i < n_new; ++i) {
        const int64_t row = g * static_cast<int64_t>(n_new);
        if (options.from_base[i]) {
          std::memcpy(&buf.kb[(row + n_base) * d], options.base_k + (static_cast<int64_t>(i) * n_kv + g) * d, sizeof(float) * d);
          std::memcpy(&buf.vb[(row + n_base) * d], &vn[(row + i) * d], sizeof(float) * d);
          base[n_base++] = i;
        } else {
          if (n_own != i) {  // forward in-place move: rows n_own < i are already read
            std::memcpy(&kn[(row + n_own) * d], &kn[(row + i) * d], sizeof(float) * d);
            std::memcpy(&vn[(row + n_own) * d], &vn[(row + i) * d], sizeof(float) * d);
          }
          own[n_own++] = i;
        }
      }
      buf.vla_n[2 * g] = n_own;
      buf.vla_n[2 * g + 1] = n_base;
    }
  }
  // Sparse: each head's kept new tokens gathered to the front of its rows (in order), so
  // the new-token attention reads only those.
  if (sparse) {
    buf.kept_new.resize(static_cast<size_t>(n_kv) * n_new);
    buf.n_kept_new.assign(n_kv, 0);
    for (int g = 0; g < n_kv; ++g) {
      const uint8_t* keep_new = options.keep + g * n_keys + layer.n_tokens;
      int* idx = &buf.kept_new[static_cast<size_t>(g) * n_new];
      int n_kept = 0;
      for (int i = 0; i < n_new; ++i) {
        if (!keep_new[i]) continue;
        if (n_kept != i) {  // rows n_kept < i: a forward in-place move never overwrites unread rows
          std::memcpy(&kn[(g * static_cast<int64_t>(n_new) + n_kept) * d], &kn[(g * static_cast<int64_t>(n_new) + i) * d],
                      sizeof(float) * d);
          std::memcpy(&vn[(g * static_cast<int64_t>(n_new) + n_kept) * d], &vn[(g * static_cast<int64_t>(n_new) + i) * d],
                      sizeof(float) * d);
        }
        idx[n_kept++] = i;
      }
      buf.n_kept_new[g] = n_kept;
    }
  }

  // Phase B: task = (kv head, tile): merge splits, add the causal new tokens, normalize.
  // A decode step's phase B is a few microseconds: run it on the calling thread.
  const int64_t n_tasks_b = static_cast<int64_t>(n_kv) * n_tiles;
  pool.parallel_for(n_tasks_b, [&](int64_t begin, int64_t end, int) {
    Scratch& s = thread_scratch();
    prepare(s);
    for (int64_t task = begin; task < end; ++task) {
      const int tile = static_cast<int>(task % n_tiles), g = static_cast<int>(task / n_tiles);
      const int rows = tile_size(tile);
      RowState st{s.m.data(), s.l.data(), s.acc.data(), out_rot ? s.acc2.data() : nullptr};
      init_state(st, rows, d);
      for (int64_t sp = 0; sp < n_splits; ++sp) merge_state(st, part(task * n_splits + sp), rows, d);
      if (out_rot) {  // rotated-basis values: back to the original basis, once, then one accumulator
        out_rot->untransform_output(st.acc2, rows, d);
        for (int64_t i = 0; i < static_cast<int64_t>(rows) * d; ++i) st.acc[i] += st.acc2[i];
        st.acc2 = nullptr;
      }
      gather_q(g, tile, s.qt.data());
      // The new tokens of head g as a one-page f32 segment.
      const uint8_t* page[1] = {reinterpret_cast<const uint8_t*>(&kn[static_cast<size_t>(g) * n_new * d])};
      const uint8_t* vpage[1] = {reinterpret_cast<const uint8_t*>(&vn[static_cast<size_t>(g) * n_new * d])};
      const int64_t first_tok = static_cast<int64_t>(tile) * tile_tokens;
      const int64_t last_tok = first_tok + rows / group - 1;
      // Row r sees gathered new keys [0, row_last[r]]: all up to its token, or the kept ones.
      const int* kept = sparse ? &buf.kept_new[static_cast<size_t>(g) * n_new] : nullptr;
      const int n_kept = sparse ? buf.n_kept_new[g] : 0;
      // Folds gathered new rows (kp, vp) with step indices idx (null: all, in order) into st.
      auto fold_new = [&](const uint8_t* const* kp, const uint8_t* const* vp, const int* idx, int n_idx,
                          const float* q_tile) {
        // Gathered index of the last new key at or before step token tok (-1: none).
        auto seen = [&](int64_t tok) -> int64_t {
          return idx ? (std::upper_bound(idx, idx + n_idx, tok) - idx) - 1 : std::clamp<int64_t>(tok, -1, n_new - 1);
        };
        // Row of token i sees new keys j <= i (all, non-causal) and, windowed, j > i - window.
        for (int r = 0; r < rows; ++r) {
          const int64_t i = first_tok + r / group;
          s.row_last[r] = seen(options.non_causal ? n_new - 1 : i);
          s.row_first[r] = windowed ? seen(i - options.window) + 1 : 0;
        }
        const int64_t n_keys_new = seen(options.non_causal ? n_new - 1 : last_tok) + 1;
        const int64_t j_begin = windowed ? seen(first_tok - options.window) + 1 : 0;
        for (int64_t j0 = j_begin; j0 < n_keys_new; j0 += kChunkTokens) {
          const int64_t n = std::min<int64_t>(kChunkTokens, n_keys_new - j0);
          const Chunk c = attn::f32_rows_chunk(f32, kp, vp, j0, n, n_new, d);
          for (int r = 0; r < rows; ++r) {
            s.limit[r] = s.row_last[r] - j0;
            s.first[r] = s.row_first[r] - j0;
          }
          FoldMask mk;
          mk.limit = s.limit.data();
          mk.first = s.first.data();
          fold_chunk(c, q_tile, rows, d, scale, mk, st, s.logits.data());
        }
      };
      if (vla) {
        const int* own = &buf.vla_idx[2 * static_cast<size_t>(g) * n_new];
        const uint8_t* bpage[1] = {reinterpret_cast<const uint8_t*>(&buf.kb[static_cast<size_t>(g) * n_new * d])};
        const uint8_t* bvpage[1] = {reinterpret_cast<const uint8_t*>(&buf.vb[static_cast<size_t>(g) * n_new * d])};
        gather_q(g, tile, s.qb.data(), options.base_q);
        fold_new(page, vpage, own, buf.vla_n[2 * g], s.qt.data());
        fold_new(bpage, bvpage, own + n_new, buf.vla_n[2 * g + 1], s.qb.data());
      } else {
        fold_new(page, vpage, kept, n_kept, s.qt.data());
      }
      if (sparse) {  // a query whose own key was not kept still attends itself
        const uint8_t* keep_new = options.keep + g * n_keys + layer.n_tokens;
        for (int r = 0; r < rows; ++r) {
          const int64_t i = first_tok + r / group;
          if (keep_new[i]) continue;
          const float* qr = s.qt.data() + static_cast<int64_t>(r) * d;
          const float* ki = k + (i * n_kv + g) * d;
          const float* vi = v + (i * n_kv + g) * d;
          float dot = 0.0f;
          for (int x = 0; x < d; ++x) dot += qr[x] * ki[x];
          const float logit = scale * dot, m_new = std::max(st.m[r], logit);
          const float alpha = st.m[r] == kNegInf ? 0.0f : std::exp(st.m[r] - m_new), p = std::exp(logit - m_new);
          float* a = st.acc + static_cast<int64_t>(r) * d;
          for (int x = 0; x < d; ++x) a[x] = a[x] * alpha + p * vi[x];
          st.l[r] = st.l[r] * alpha + p;
          st.m[r] = m_new;
        }
      }
      if (options.probe_state && !sparse) {
        const ProbeRows& pr = *options.probe_state;
        for (int r = 0; r < rows; ++r) {
          const int i = static_cast<int>(first_tok + r / group);
          const int* at = std::lower_bound(pr.tokens, pr.tokens + pr.n, i);
          if (at == pr.tokens + pr.n || *at != i) continue;
          const int64_t slot = (at - pr.tokens) * static_cast<int64_t>(n_heads) + g * group + r % group;
          pr.m[slot] = st.m[r];
          pr.l[slot] = st.l[r];
        }
      }
      for (int r = 0; r < rows; ++r) {
        const int64_t i = first_tok + r / group;
        float* o = out + (i * n_heads + g * group + r % group) * d;
        const float inv = static_cast<float>(1.0 / st.l[r]);
        for (int x = 0; x < d; ++x) o[x] = st.acc[static_cast<int64_t>(r) * d + x] * inv;
      }
    }
  }, n_new == 1 ? n_tasks_b : 1);
}

double sparse_attention_work(const LayerCache& layer, const LayerCache* key_source, const uint8_t* keep, int n_new,
                             const AttendShape& shape) {
  const int64_t n_cached = layer.n_tokens, n_keys = n_cached + n_new;
  // (query token, key) pairs; the query heads of a kv head's group all read the same keys.
  const double dense = static_cast<double>(n_new) * static_cast<double>(n_cached) +
                       0.5 * static_cast<double>(n_new) * static_cast<double>(n_new + 1);
  if (dense <= 0.0) return 1.0;
  thread_local std::vector<Chunk> chunks;
  double sparse = 0.0;
  for (int g = 0; g < shape.n_kv_heads; ++g) {
    const uint8_t* kg = keep + g * n_keys;  // [n_keys]
    chunks.clear();
    build_chunks(layer, key_source, g, shape.head_dim, chunks);
    int64_t cached_read = 0;  // cached keys in runs the attention reads (kept or masked)
    for (const Chunk& c : chunks)
      attn::for_each_kept_run(c, kg + c.first, [&](int64_t, int64_t n) { cached_read += n; });
    double new_read = 0.0;  // query i reads the kept new keys j <= i (and itself)
    int64_t kept = 0;
    for (int i = 0; i < n_new; ++i) {
      kept += kg[n_cached + i] != 0;
      new_read += static_cast<double>(kept) + (kg[n_cached + i] ? 0.0 : 1.0);
    }
    sparse += static_cast<double>(n_new) * static_cast<double>(cached_read) + new_read;
  }
  return sparse / (dense * shape.n_kv_heads);
}

}  // namespace vlkv
