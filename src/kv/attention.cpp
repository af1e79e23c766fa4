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
#include "kv/attention_gemm.h"
#include "kv/codecs/view_prefetch.h"
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
    if (!ks->present()) {  // no K of its own: keys of key_source's matching segment
      VLKV_CHECK_MSG(key_source && i < key_source->heads[g].segments.size() &&
                         key_source->heads[g].segments[i].n_tokens >= s.n_tokens &&
                         key_source->heads[g].segments[i].k.present(),
                     "a segment without K has no matching key_source segment");
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
  static const SimdTable<SoftmaxKernels> table(VLKV_SIMD_VARIANTS(&kScalar, kSoftmaxKernels, avx2, avx512, neon));
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

constexpr int64_t kValuePrefetchBytes = 8192;  // decode, depth 1024: -5% CPU per token vs none

// Folds one chunk into the state; masked keys get probability 0. gemm null: the codecs'
// fused kernels; else the GEMM path (attention_gemm.h, f16/f32 chunks), and gather ([chunk
// tokens] or null) folds only the keys marked 1 (mk then masks nothing).
//   qt: [rows, head_dim] (through the key codec's query transform on the fused path)
//   logits: scratch [rows, gemm_logits_ld(chunk tokens)]
void fold_chunk(const Chunk& c, const float* qt, int rows, int d, float scale, const FoldMask& mk, RowState st,
                float* logits, attn::GemmScratch* gemm, const uint8_t* gather = nullptr) {
  const int64_t n = gemm ? attn::gemm_pack(c, gather, d, *gemm) : c.k.n_tokens;
  const int64_t ld = gemm ? attn::gemm_logits_ld(n) : n;
  if (n == 0) return;
  if (gemm) attn::gemm_scores(*gemm, n, qt, rows, d, scale, logits, ld);
  else {
    // The chunk's first value pages load while its keys are scored (the kernels' own
    // prefetches start cold at each view).
    ViewPrefetcher(c.v, std::max<int64_t>(1, kValuePrefetchBytes / c.v.block_bytes)).at(0);
    c.kc->scores(qt, rows, c.k, scale, logits, ld);
  }
  const bool win_pos = mk.window > 0 && mk.head_pos;  // out-of-order keys: masked one by one
  for (int r = 0; r < rows; ++r) {
    float* lr = logits + r * ld;  // [n] logits, then probabilities
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
  if (gemm) attn::gemm_accumulate(*gemm, n, logits, ld, rows, d, st.acc);
  else c.vc->accumulate(logits, ld, rows, c.v, c.vc->output_transform() ? st.acc2 : st.acc);
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
  std::vector<float> qt;          // [tile rows, head_dim]
  std::vector<float> qt2;         // [tile rows, head_dim] qt through a codec's query transform
  std::vector<float> qa;          // [tile rows, head_dim] the second query set (AttendOptions::alt_q)
  std::vector<float> acc2;        // [tile rows, head_dim] merged rotated-basis accumulator
  std::vector<float> logits;      // [tile rows, longest chunk (kChunkTokens or a codec block), padded]
  std::vector<int64_t> limit;     // [tile rows]
  std::vector<int64_t> row_last;  // [tile rows] last gathered new key each row sees
  std::vector<int64_t> first;     // [tile rows] first gathered new key each row sees (window)
  std::vector<int64_t> row_first; // [tile rows]
  std::vector<int64_t> qpos;      // [tile rows] sequence position of each row's query
  std::vector<float> m, acc;      // a tile's merged state
  std::vector<double> l;
  attn::GemmScratch gemm;
};

// The calling thread's Scratch. A block-scope thread_local is constructed, and its destructor
// registered, only in a thread that runs its declaration: declared in attend_layer and named
// in a pool task, the workers' copies were used unconstructed and their buffers leaked at exit.
Scratch& thread_scratch() {
  thread_local Scratch s;
  return s;
}

// Per-step buffers of the calling thread, reused across steps (no allocation once warm).
struct StepBuffers {
  std::vector<Chunk> chunks;        // every kv head's chunks, head after head
  std::vector<size_t> head_begin;   // [n_kv + 1] offsets into chunks
  std::vector<double> cost;         // [chunks + n_kv] per head: prefix sums of chunk bytes
  std::vector<float> part_m, part_acc, part_acc2, kn, vn;
  std::vector<double> part_l;
  std::vector<int> kept_new;    // [n_kv, n_new] sparse: step indices of each head's kept new tokens
  std::vector<int> n_kept_new;  // [n_kv]
  std::vector<float> ka, va;    // [n_kv, n_new, head_dim] new tokens keyed by alt_k
  std::vector<int> alt_idx;     // [n_kv, 2, n_new] step indices of own / alt-keyed new tokens
  std::vector<int> alt_n;       // [n_kv, 2]
};

// One attend_layer call: its inputs, its shape and how its work is split into tasks.
// Rows of tile `tile` of kv head g: row r = (token tile * tile_tokens + r / group, query
// head g * group + r % group).
struct LayerStep {
  const LayerCache& layer;
  const LayerCache* key_source;
  const Codec& f32;
  const float *q, *k, *v;
  int n_new;
  float scale;
  float* out;
  const AttendOptions& o;
  StepBuffers& buf;
  int n_kv, d, n_heads, group, tile_tokens, n_tiles, tile_rows;
  int64_t n_keys;  // step key order: cached (storage order), then new
  bool sparse, alt, windowed;
  bool gemm;  // prefill: scores and P.V through the GEMM path (attention_gemm.h)
  int64_t n_splits = 1;                     // tasks per (kv head, tile) over the cached chunks
  int64_t max_chunk_tokens = kChunkTokens;  // codecs with blocks over 256 tokens make longer chunks
  const Codec* out_rot = nullptr;           // the value codec whose output transform acc2 undoes

  int tile_size(int tile) const { return std::min(tile_tokens, n_new - tile * tile_tokens) * group; }
  RowState part(int64_t task) const {
    const int64_t r = task * tile_rows;
    return RowState{buf.part_m.data() + r, buf.part_l.data() + r, buf.part_acc.data() + r * d,
                    out_rot ? buf.part_acc2.data() + r * d : nullptr};
  }
  // qt: [rows, head_dim] the tile's rows of the queries qs ([n_new, n_heads, head_dim]).
  void gather_q(int g, int tile, float* qt, const float* qs) const {
    for (int r = 0; r < tile_size(tile); ++r) {
      const int64_t i = static_cast<int64_t>(tile) * tile_tokens + r / group;
      std::memcpy(qt + static_cast<int64_t>(r) * d, qs + (i * n_heads + g * group + r % group) * d, sizeof(float) * d);
    }
  }
  // Chunks [split_begin(g, sp), split_begin(g, sp + 1)) of head g: equal shares of its bytes.
  size_t split_begin(int g, int64_t sp) const {
    const size_t b = buf.head_begin[g], e = buf.head_begin[g + 1];
    if (sp <= 0) return b;
    if (sp >= n_splits) return e;
    const double* c = buf.cost.data() + b + g;  // [e - b + 1] prefix sums
    const double target = c[e - b] * static_cast<double>(sp) / static_cast<double>(n_splits);
    return b + static_cast<size_t>(std::lower_bound(c, c + (e - b), target) - c);
  }
  void prepare(Scratch& s) const {
    s.qt.resize(static_cast<size_t>(tile_rows) * d);
    if (alt) s.qa.resize(static_cast<size_t>(tile_rows) * d);
    s.logits.resize(static_cast<size_t>(tile_rows) * attn::gemm_logits_ld(max_chunk_tokens));
    for (auto* x : {&s.limit, &s.row_last, &s.first, &s.row_first, &s.qpos}) x->resize(tile_rows);
    s.m.resize(tile_rows);
    s.l.resize(tile_rows);
    s.acc.resize(static_cast<size_t>(tile_rows) * d);
    if (out_rot) s.acc2.resize(static_cast<size_t>(tile_rows) * d);
  }
};

// Every kv head's cached chunks and their byte costs; the longest chunk and the value
// output transform they share.
void collect_chunks(LayerStep& st) {
  StepBuffers& buf = st.buf;
  buf.chunks.clear();
  buf.head_begin.assign(1, 0);
  buf.cost.clear();
  for (int g = 0; g < st.n_kv; ++g) {
    const size_t first = buf.chunks.size();
    build_chunks(st.layer, st.key_source, g, st.d, buf.chunks);
    buf.head_begin.push_back(buf.chunks.size());
    buf.cost.push_back(0.0);  // cost[head_begin[g] + g + i]: bytes of the head's chunks before chunk i
    for (size_t c = first; c < buf.chunks.size(); ++c) {
      const Chunk& ch = buf.chunks[c];
      st.max_chunk_tokens = std::max(st.max_chunk_tokens, ch.k.n_tokens);
      buf.cost.push_back(buf.cost.back() + static_cast<double>(ch.k.n_blocks()) * ch.k.block_bytes +
                         static_cast<double>(ch.v.n_blocks()) * ch.v.block_bytes + 64.0);
      if (!ch.vc->output_transform()) continue;
      VLKV_CHECK_MSG(!st.out_rot || st.out_rot->output_transform() == ch.vc->output_transform(),
                     "one layer mixes two different value output transforms");
      st.out_rot = ch.vc;
    }
  }
}

// Splits the cached chunks when heads x tiles alone cannot keep the threads busy (decode),
// and sizes the tasks' partial states: [n_tasks, tile_rows] (+ head_dim for acc).
int64_t split_tasks(LayerStep& st, int n_threads) {
  size_t max_chunks = 1;
  for (int g = 0; g < st.n_kv; ++g) max_chunks = std::max(max_chunks, st.buf.head_begin[g + 1] - st.buf.head_begin[g]);
  const int64_t want = 2 * static_cast<int64_t>(n_threads);
  st.n_splits = std::clamp<int64_t>((want + st.n_kv * st.n_tiles - 1) / (st.n_kv * st.n_tiles), 1,
                                    static_cast<int64_t>(max_chunks));
  if (n_threads == 1) st.n_splits = 1;
  const int64_t n_tasks = static_cast<int64_t>(st.n_kv) * st.n_tiles * st.n_splits;
  st.buf.part_m.resize(n_tasks * st.tile_rows);
  st.buf.part_l.resize(n_tasks * st.tile_rows);
  st.buf.part_acc.resize(n_tasks * st.tile_rows * st.d);
  if (st.out_rot) st.buf.part_acc2.resize(n_tasks * st.tile_rows * st.d);
  return n_tasks;
}

// The queries a chunk is scored with: the tile's (or the alt set's for alt-keyed chunks),
// through the key codec's query transform when it has one; s.qt2 caches the last transform.
const float* chunk_queries(const LayerStep& st, const Chunk& c, int rows, Scratch& s, int& qt2_id, bool& qt2_alt) {
  const bool alt = st.alt && c.alt_keys;
  const std::vector<float>& q_tile = alt ? s.qa : s.qt;
  const int id = c.kc->query_transform();
  if (!id) return q_tile.data();
  if (id != qt2_id || alt != qt2_alt) {
    s.qt2.assign(q_tile.begin(), q_tile.begin() + static_cast<int64_t>(rows) * st.d);
    c.kc->transform_query(s.qt2.data(), rows, st.d);
    qt2_id = id;
    qt2_alt = alt;
  }
  return s.qt2.data();
}

// Phase A, task = (kv head, tile, split): folds the split's cached chunks into part(task).
void fold_cached(const LayerStep& st, int64_t task, Scratch& s) {
  const int split = static_cast<int>(task % st.n_splits);
  const int tile = static_cast<int>(task / st.n_splits % st.n_tiles);
  const int g = static_cast<int>(task / st.n_splits / st.n_tiles);
  const int rows = st.tile_size(tile);
  RowState rs = st.part(task);
  init_state(rs, rows, st.d);
  const Chunk* cs = st.buf.chunks.data();
  const size_t c0 = st.split_begin(g, split), c1 = st.split_begin(g, split + 1);
  if (c0 == c1) return;
  st.gather_q(g, tile, s.qt.data(), st.q);
  if (st.alt) st.gather_q(g, tile, s.qa.data(), st.o.alt_q);
  FoldMask mk;
  const int64_t* head_pos = st.o.cached_pos ? st.o.cached_pos + g * st.layer.n_tokens : nullptr;
  if (st.windowed) {
    for (int r = 0; r < rows; ++r)
      s.qpos[r] = st.layer.n_tokens + static_cast<int64_t>(tile) * st.tile_tokens + r / st.group;
    mk.window = st.o.window;
    mk.qpos = s.qpos.data();
    mk.head_pos = head_pos;
  }
  int qt2_id = 0;       // query transform held in s.qt2: applied once per task, not per chunk
  bool qt2_alt = false;  // s.qt2 holds the alt queries
  for (size_t c = c0; c < c1; ++c) {
    const uint8_t* keep_c = st.sparse ? st.o.keep + g * st.n_keys + cs[c].first : nullptr;
    if (st.sparse && std::find(keep_c, keep_c + cs[c].k.n_tokens, uint8_t{1}) == keep_c + cs[c].k.n_tokens) continue;
    if (st.windowed) {  // a chunk every row's window has left is not read (decode reads ~window keys)
      int64_t newest = cs[c].first + cs[c].k.n_tokens - 1;
      if (head_pos) newest = *std::max_element(head_pos + cs[c].first, head_pos + cs[c].first + cs[c].k.n_tokens);
      if (s.qpos[0] - newest >= st.o.window) continue;
    }
    attn::GemmScratch* gemm = st.gemm && attn::gemm_reads(cs[c]) ? &s.gemm : nullptr;
    const float* qc = chunk_queries(st, cs[c], rows, s, qt2_id, qt2_alt);
    if (!st.sparse) {
      fold_chunk(cs[c], qc, rows, st.d, st.scale, mk, rs, s.logits.data(), gemm);
      continue;
    }
    if (gemm && !st.windowed) {  // only the kept keys are packed: no masked scores at all
      fold_chunk(cs[c], qc, rows, st.d, st.scale, mk, rs, s.logits.data(), gemm, keep_c);
      continue;
    }
    attn::for_each_kept_run(cs[c], keep_c, [&](int64_t t0, int64_t n) {
      FoldMask mk_run = mk;
      mk_run.keep = keep_c + t0;
      fold_chunk(attn::sub_chunk(cs[c], t0, n), qc, rows, st.d, st.scale, mk_run, rs, s.logits.data(), gemm);
    });
  }
}

// Moves row i of head g's new rows (kn, vn: [n_kv, n_new, head_dim]) to row j <= i.
void move_new_row(const LayerStep& st, int g, int64_t j, int64_t i) {
  const int64_t base = g * static_cast<int64_t>(st.n_new);
  std::memcpy(&st.buf.kn[(base + j) * st.d], &st.buf.kn[(base + i) * st.d], sizeof(float) * st.d);
  std::memcpy(&st.buf.vn[(base + j) * st.d], &st.buf.vn[(base + i) * st.d], sizeof(float) * st.d);
}

// New tokens' K/V per kv head, contiguous: kn, vn = [n_kv_heads, n_new, head_dim].
void gather_new_rows(LayerStep& st) {
  StepBuffers& buf = st.buf;
  const int d = st.d, n_kv = st.n_kv;
  buf.kn.resize(static_cast<size_t>(n_kv) * st.n_new * d);
  buf.vn.resize(buf.kn.size());
  for (int64_t i = 0; i < st.n_new; ++i)
    for (int g = 0; g < n_kv; ++g) {
      std::memcpy(&buf.kn[(g * static_cast<int64_t>(st.n_new) + i) * d], st.k + (i * n_kv + g) * d, sizeof(float) * d);
      std::memcpy(&buf.vn[(g * static_cast<int64_t>(st.n_new) + i) * d], st.v + (i * n_kv + g) * d, sizeof(float) * d);
    }
}

// alt: each head's new tokens split into own rows, gathered to the front of kn/vn, and
// alt-keyed rows (keys alt_k, scored with alt_q) in ka/va; alt_idx lists their step indices.
void split_alt_rows(LayerStep& st) {
  StepBuffers& buf = st.buf;
  const int d = st.d, n_new = st.n_new;
  buf.ka.resize(buf.kn.size());
  buf.va.resize(buf.kn.size());
  buf.alt_idx.resize(2 * static_cast<size_t>(st.n_kv) * n_new);
  buf.alt_n.assign(2 * static_cast<size_t>(st.n_kv), 0);
  for (int g = 0; g < st.n_kv; ++g) {
    int* own = &buf.alt_idx[2 * static_cast<size_t>(g) * n_new];
    int* alt = own + n_new;
    int n_own = 0, n_alt = 0;
    const int64_t row = g * static_cast<int64_t>(n_new);
    for (int i = 0; i < n_new; ++i) {
      if (st.o.from_alt[i]) {
        std::memcpy(&buf.ka[(row + n_alt) * d], st.o.alt_k + (static_cast<int64_t>(i) * st.n_kv + g) * d, sizeof(float) * d);
        std::memcpy(&buf.va[(row + n_alt) * d], &buf.vn[(row + i) * d], sizeof(float) * d);
        alt[n_alt++] = i;
      } else {
        if (n_own != i) move_new_row(st, g, n_own, i);  // forward in-place move: rows n_own < i are already read
        own[n_own++] = i;
      }
    }
    buf.alt_n[2 * g] = n_own;
    buf.alt_n[2 * g + 1] = n_alt;
  }
}

// Sparse: each head's kept new tokens gathered to the front of its rows (in order), so the
// new-token attention reads only those.
void gather_kept_rows(LayerStep& st) {
  StepBuffers& buf = st.buf;
  buf.kept_new.resize(static_cast<size_t>(st.n_kv) * st.n_new);
  buf.n_kept_new.assign(st.n_kv, 0);
  for (int g = 0; g < st.n_kv; ++g) {
    const uint8_t* keep_new = st.o.keep + g * st.n_keys + st.layer.n_tokens;
    int* idx = &buf.kept_new[static_cast<size_t>(g) * st.n_new];
    int n_kept = 0;
    for (int i = 0; i < st.n_new; ++i) {
      if (!keep_new[i]) continue;
      if (n_kept != i) move_new_row(st, g, n_kept, i);  // rows n_kept < i: never overwrites unread rows
      idx[n_kept++] = i;
    }
    buf.n_kept_new[g] = n_kept;
  }
}

// New rows of one kv head as a one-page f32 segment.
struct NewRows {
  const uint8_t* kp[1];
  const uint8_t* vp[1];
  const int* idx;  // [n_idx] their step indices, ascending; null: all n_new in order
  int n_idx;
};
NewRows new_rows(const LayerStep& st, const std::vector<float>& kr, const std::vector<float>& vr, int g, const int* idx,
                 int n_idx) {
  const size_t off = static_cast<size_t>(g) * st.n_new * st.d;
  return NewRows{{reinterpret_cast<const uint8_t*>(&kr[off])}, {reinterpret_cast<const uint8_t*>(&vr[off])}, idx, n_idx};
}

// Folds the new rows nr into rs for the rows of tile `tile`: row of token i sees new keys
// j <= i (all, non-causal) and, windowed, j > i - window.
void fold_new(const LayerStep& st, Scratch& s, RowState rs, int tile, const NewRows& nr, const float* q_tile) {
  const int rows = st.tile_size(tile);
  const int64_t first_tok = static_cast<int64_t>(tile) * st.tile_tokens;
  const int64_t last_tok = first_tok + rows / st.group - 1;
  // Gathered index of the last new key at or before step token tok (-1: none).
  auto seen = [&](int64_t tok) -> int64_t {
    return nr.idx ? (std::upper_bound(nr.idx, nr.idx + nr.n_idx, tok) - nr.idx) - 1
                  : std::clamp<int64_t>(tok, -1, st.n_new - 1);
  };
  for (int r = 0; r < rows; ++r) {
    const int64_t i = first_tok + r / st.group;
    s.row_last[r] = seen(st.o.non_causal ? st.n_new - 1 : i);
    s.row_first[r] = st.windowed ? seen(i - st.o.window) + 1 : 0;
  }
  const int64_t n_keys_new = seen(st.o.non_causal ? st.n_new - 1 : last_tok) + 1;
  const int64_t j_begin = st.windowed ? seen(first_tok - st.o.window) + 1 : 0;
  for (int64_t j0 = j_begin; j0 < n_keys_new; j0 += kChunkTokens) {
    const int64_t n = std::min<int64_t>(kChunkTokens, n_keys_new - j0);
    const Chunk c = attn::f32_rows_chunk(st.f32, nr.kp, nr.vp, j0, n, st.n_new, st.d);
    for (int r = 0; r < rows; ++r) {
      s.limit[r] = s.row_last[r] - j0;
      s.first[r] = s.row_first[r] - j0;
    }
    FoldMask mk;
    mk.limit = s.limit.data();
    mk.first = s.first.data();
    fold_chunk(c, q_tile, rows, st.d, st.scale, mk, rs, s.logits.data(), st.gemm ? &s.gemm : nullptr);
  }
}

// Sparse: a query whose own key was not kept still attends itself.
void fold_unkept_self(const LayerStep& st, const Scratch& s, RowState rs, int g, int tile) {
  const uint8_t* keep_new = st.o.keep + g * st.n_keys + st.layer.n_tokens;
  const int d = st.d;
  for (int r = 0; r < st.tile_size(tile); ++r) {
    const int64_t i = static_cast<int64_t>(tile) * st.tile_tokens + r / st.group;
    if (keep_new[i]) continue;
    const float* qr = s.qt.data() + static_cast<int64_t>(r) * d;
    const float* ki = st.k + (i * st.n_kv + g) * d;
    const float* vi = st.v + (i * st.n_kv + g) * d;
    float dot = 0.0f;
    for (int x = 0; x < d; ++x) dot += qr[x] * ki[x];
    const float logit = st.scale * dot, m_new = std::max(rs.m[r], logit);
    const float alpha = rs.m[r] == kNegInf ? 0.0f : std::exp(rs.m[r] - m_new), p = std::exp(logit - m_new);
    float* a = rs.acc + static_cast<int64_t>(r) * d;
    for (int x = 0; x < d; ++x) a[x] = a[x] * alpha + p * vi[x];
    rs.l[r] = rs.l[r] * alpha + p;
    rs.m[r] = m_new;
  }
}

// Writes the final softmax state of the tile's probe rows (AttendOptions::probe_state).
void save_probe_state(const LayerStep& st, const RowState& rs, int g, int tile) {
  const ProbeRows& pr = *st.o.probe_state;
  for (int r = 0; r < st.tile_size(tile); ++r) {
    const int i = static_cast<int>(static_cast<int64_t>(tile) * st.tile_tokens + r / st.group);
    const int* at = std::lower_bound(pr.tokens, pr.tokens + pr.n, i);
    if (at == pr.tokens + pr.n || *at != i) continue;
    const int64_t slot = (at - pr.tokens) * static_cast<int64_t>(st.n_heads) + g * st.group + r % st.group;
    pr.m[slot] = rs.m[r];
    pr.l[slot] = rs.l[r];
  }
}

// Phase B, task = (kv head, tile): merges the splits, adds the new tokens, normalizes.
void finish_tile(const LayerStep& st, int64_t task, Scratch& s) {
  const int tile = static_cast<int>(task % st.n_tiles), g = static_cast<int>(task / st.n_tiles);
  const int rows = st.tile_size(tile), d = st.d;
  const StepBuffers& buf = st.buf;
  RowState rs{s.m.data(), s.l.data(), s.acc.data(), st.out_rot ? s.acc2.data() : nullptr};
  init_state(rs, rows, d);
  for (int64_t sp = 0; sp < st.n_splits; ++sp) merge_state(rs, st.part(task * st.n_splits + sp), rows, d);
  if (st.out_rot) {  // rotated-basis values: back to the original basis, once, then one accumulator
    st.out_rot->untransform_output(rs.acc2, rows, d);
    for (int64_t i = 0; i < static_cast<int64_t>(rows) * d; ++i) rs.acc[i] += rs.acc2[i];
    rs.acc2 = nullptr;
  }
  st.gather_q(g, tile, s.qt.data(), st.q);
  if (st.alt) {
    const int* own = &buf.alt_idx[2 * static_cast<size_t>(g) * st.n_new];
    st.gather_q(g, tile, s.qa.data(), st.o.alt_q);
    fold_new(st, s, rs, tile, new_rows(st, buf.kn, buf.vn, g, own, buf.alt_n[2 * g]), s.qt.data());
    fold_new(st, s, rs, tile, new_rows(st, buf.ka, buf.va, g, own + st.n_new, buf.alt_n[2 * g + 1]), s.qa.data());
  } else if (st.sparse) {
    const int* kept = &buf.kept_new[static_cast<size_t>(g) * st.n_new];
    fold_new(st, s, rs, tile, new_rows(st, buf.kn, buf.vn, g, kept, buf.n_kept_new[g]), s.qt.data());
    fold_unkept_self(st, s, rs, g, tile);
  } else {
    fold_new(st, s, rs, tile, new_rows(st, buf.kn, buf.vn, g, nullptr, 0), s.qt.data());
  }
  if (st.o.probe_state && !st.sparse) save_probe_state(st, rs, g, tile);
  for (int r = 0; r < rows; ++r) {
    const int64_t i = static_cast<int64_t>(tile) * st.tile_tokens + r / st.group;
    float* o = st.out + (i * st.n_heads + g * st.group + r % st.group) * d;
    const float inv = static_cast<float>(1.0 / rs.l[r]);
    for (int x = 0; x < d; ++x) o[x] = rs.acc[static_cast<int64_t>(r) * d + x] * inv;
  }
}

}  // namespace

void attend_layer(const LayerCache& layer, const LayerCache* key_source, const Codec& f32, const float* q,
                  const float* k, const float* v, int n_new, float scale, float* out, const AttendShape& shape,
                  ThreadPool& pool, const AttendOptions& options) {
  thread_local StepBuffers tls_buf;  // the caller's: the tasks below run on worker threads too
  const int group = shape.n_heads / shape.n_kv_heads;
  const bool gemm = n_new >= attn::kGemmMinTokens && attn::gemm_path_fits(shape.head_dim);
  const int tile_tokens = std::max(1, (gemm ? attn::kGemmTileRows : kTileRows) / group);
  LayerStep st{layer, key_source, f32, q, k, v, n_new, scale, out, options, tls_buf,
               shape.n_kv_heads, shape.head_dim, shape.n_heads, group, tile_tokens,
               (n_new + tile_tokens - 1) / tile_tokens, tile_tokens * group, layer.n_tokens + n_new,
               options.keep != nullptr, options.alt_q != nullptr, options.window > 0, gemm};
  VLKV_CHECK_MSG(!st.alt || (!st.sparse && options.alt_k && options.from_alt), "alt_q needs alt_k, from_alt, no keep");
  collect_chunks(st);
  const int64_t n_tasks = split_tasks(st, pool.n_threads());
  pool.parallel_for(n_tasks, [&](int64_t begin, int64_t end, int) {  // phase A: the cached chunks
    Scratch& s = thread_scratch();
    st.prepare(s);
    for (int64_t task = begin; task < end; ++task) fold_cached(st, task, s);
  });
  gather_new_rows(st);
  if (st.alt) split_alt_rows(st);
  if (st.sparse) gather_kept_rows(st);
  // Phase B: a decode step's is a few microseconds: run it on the calling thread.
  const int64_t n_tasks_b = static_cast<int64_t>(st.n_kv) * st.n_tiles;
  pool.parallel_for(n_tasks_b, [&](int64_t begin, int64_t end, int) {
    Scratch& s = thread_scratch();
    st.prepare(s);
    for (int64_t task = begin; task < end; ++task) finish_tile(st, task, s);
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
