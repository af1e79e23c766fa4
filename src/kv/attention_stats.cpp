#include "kv/attention_stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "base/check.h"
#include "kv/attention_chunks.h"
#include "kv/attention_gemm.h"

namespace vlkv {
namespace {

using attn::Chunk;
using attn::kChunkTokens;
using attn::kNegInf;
using attn::kTileRows;

// The probe rows of one kv head in tiles: row r of tile t = (probe t * tile_probes + r / group,
// query head g * group + r % group).
struct ProbeTiles {
  int group, tile_probes, n_tiles;
  ProbeTiles(const AttendShape& s, int n_probes)
      : group(s.n_heads / s.n_kv_heads), tile_probes(std::max(1, kTileRows / group)),
        n_tiles((n_probes + tile_probes - 1) / tile_probes) {}
  int first_probe(int tile) const { return tile * tile_probes; }
  int rows(int tile, int n_probes) const { return std::min(tile_probes, n_probes - first_probe(tile)) * group; }
};

struct StatScratch {
  std::vector<float> qt, qt2;   // [kTileRows, head_dim] probe queries, and through a query transform
  std::vector<float> logits;    // [kTileRows, kChunkTokens]
  std::vector<float> tile_logits;  // probe_stats: [kTileRows, keys a tile sees], only grown (no refill)
  std::vector<float> m;         // [kTileRows]
  std::vector<double> l;        // [kTileRows]
  attn::GemmScratch gemm;
};
thread_local StatScratch tls_scratch;

StatScratch& scratch(int d) {
  StatScratch& s = tls_scratch;
  s.qt.resize(static_cast<size_t>(kTileRows) * d);
  s.logits.resize(static_cast<size_t>(kTileRows) * kChunkTokens);
  s.m.resize(kTileRows);
  s.l.resize(kTileRows);
  return s;
}

void gather_probe_q(const float* q, const AttendShape& shape, const ProbeRows& pr, const ProbeTiles& pt, int g,
                    int tile, float* qt) {
  const int d = shape.head_dim, rows = pt.rows(tile, pr.n);
  for (int r = 0; r < rows; ++r) {
    const int64_t i = pr.tokens[pt.first_probe(tile) + r / pt.group];
    std::memcpy(qt + static_cast<int64_t>(r) * d, q + (i * shape.n_heads + g * pt.group + r % pt.group) * d,
                sizeof(float) * d);
  }
}

// The query tile as the chunk's key codec reads it (transformed when the codec asks).
const float* query_for(const Chunk& c, StatScratch& s, int rows, int d, int& qt2_id) {
  const int id = c.kc->query_transform();
  if (!id) return s.qt.data();
  if (id != qt2_id) {
    s.qt2.assign(s.qt.begin(), s.qt.begin() + static_cast<int64_t>(rows) * d);
    c.kc->transform_query(s.qt2.data(), rows, d);
    qt2_id = id;
  }
  return s.qt2.data();
}

// logits[r * ld + t] = scale * (probe row r . key t) over chunk c: f16/f32 chunks of long
// probe tiles through the GEMM path (as the prefill attention), others through the codec.
void score_chunk(const Chunk& c, StatScratch& s, int rows, int d, float scale, float* logits, int64_t ld, int& qt2_id) {
  if (rows >= attn::kGemmMinTokens && attn::gemm_path_fits(d) && attn::gemm_reads(c))
    attn::gemm_chunk_scores(c, s.qt.data(), rows, d, scale, logits, ld, s.gemm);
  else
    c.kc->scores(query_for(c, s, rows, d, qt2_id), rows, c.k, scale, logits, ld);
}

// Keys of the new tokens per kv head, contiguous: [n_kv_heads, n_new, head_dim].
void gather_new_keys(const float* k, int n_new, int n_kv, int d, std::vector<float>& kn) {
  kn.resize(static_cast<size_t>(n_kv) * n_new * d);
  for (int64_t i = 0; i < n_new; ++i)
    for (int g = 0; g < n_kv; ++g)
      std::memcpy(&kn[(g * static_cast<int64_t>(n_new) + i) * d], k + (i * n_kv + g) * d, sizeof(float) * d);
}

// Every kv head's cached chunks, head after head; head_begin: [n_kv + 1] offsets.
void all_chunks(const LayerCache& layer, const LayerCache* key_source, int n_kv, int d, std::vector<Chunk>& chunks,
                std::vector<size_t>& head_begin) {
  chunks.clear();
  head_begin.assign(1, 0);
  for (int g = 0; g < n_kv; ++g) {
    attn::build_chunks(layer, key_source, g, d, chunks);
    head_begin.push_back(chunks.size());
  }
}

// What both probe passes start from: the step's sizes, the probe tiles, and the keys the probes
// read: every kv head's cached chunks and the new keys per head.
struct ProbePass {
  int n_kv, d;
  int64_t n_cached, n_keys;
  ProbeTiles pt;
  const std::vector<Chunk>& cs;   // cached chunks, head after head
  const std::vector<size_t>& hb;  // [n_kv + 1] offsets into cs
  const std::vector<float>& keys; // [n_kv, n_new, head_dim] new keys
};

// The outputs zeroed (key_mass [n_kv, n_keys], probe_maps [n_probes, n_heads, n_keys] when
// given) and the calling thread's chunk lists filled (reused across calls); the pool's workers
// read them through the returned references.
ProbePass start_probe_pass(const LayerCache& layer, const LayerCache* key_source, const float* k, int n_new,
                           const AttendShape& shape, int n_probes, float* key_mass, float* probe_maps) {
  const int n_kv = shape.n_kv_heads, d = shape.head_dim;
  const int64_t n_keys = layer.n_tokens + n_new;
  std::fill(key_mass, key_mass + n_kv * n_keys, 0.0f);
  if (probe_maps) std::fill(probe_maps, probe_maps + static_cast<int64_t>(n_probes) * shape.n_heads * n_keys, 0.0f);
  thread_local std::vector<Chunk> chunks;
  thread_local std::vector<size_t> head_begin;
  thread_local std::vector<float> new_keys;
  all_chunks(layer, key_source, n_kv, d, chunks, head_begin);
  gather_new_keys(k, n_new, n_kv, d, new_keys);
  return {n_kv, d, layer.n_tokens, n_keys, ProbeTiles(shape, n_probes), chunks, head_begin, new_keys};
}

}  // namespace

std::vector<int> choose_probes(const ProbePlan& plan, int n_new, uint64_t salt) {
  if (n_new <= 0) return {};
  if (plan.evenly > 0) {  // probe k at floor((k + 1) n_new / n) - 1: distinct, the last token included
    const int n = std::min(plan.evenly, n_new);
    std::vector<int> out(n);
    for (int k = 0; k < n; ++k) out[k] = static_cast<int>((static_cast<int64_t>(k + 1) * n_new) / n - 1);
    return out;
  }
  const int n_last = std::clamp(static_cast<int>(std::ceil(plan.last_frac * n_new - 1e-9)), 1, n_new);
  const int n_rand = std::clamp(static_cast<int>(std::llround(plan.random_frac * n_new)), 0, n_new - n_last);
  std::vector<int> pool(n_new - n_last);
  std::iota(pool.begin(), pool.end(), 0);
  std::mt19937_64 rng(plan.seed * 0x9E3779B97F4A7C15ull + salt);
  for (int i = 0; i < n_rand; ++i) {  // partial Fisher-Yates: the first n_rand of a random permutation
    std::uniform_int_distribution<int> pick(i, static_cast<int>(pool.size()) - 1);
    std::swap(pool[i], pool[pick(rng)]);
  }
  std::vector<int> out(pool.begin(), pool.begin() + n_rand);
  for (int i = n_new - n_last; i < n_new; ++i) out.push_back(i);
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// Probe pass 1: per task = (kv head, probe tile), the tile's logits over every key it sees, kept
// until its rows' max and sum are known (into pr.m / pr.l), then turned into probabilities and
// summed per key into the task's own partial mass; returns the partials, [n_tasks, n_keys].
const float* tile_masses(const ProbePass& pp, const Codec& f32, const float* q, int n_new, float scale,
                         const AttendShape& shape, ProbeRows& pr, ThreadPool& pool, float* probe_maps) {
  const int64_t n_tasks = static_cast<int64_t>(pp.n_kv) * pp.pt.n_tiles;
  thread_local std::vector<float> partial;  // the caller's; the workers write disjoint rows
  partial.assign(static_cast<size_t>(n_tasks) * pp.n_keys, 0.0f);
  float* const part = partial.data();
  pool.parallel_for(n_tasks, [&](int64_t begin, int64_t end, int) {
    StatScratch& s = scratch(pp.d);
    for (int64_t task = begin; task < end; ++task) {
      const int g = static_cast<int>(task / pp.pt.n_tiles), tile = static_cast<int>(task % pp.pt.n_tiles);
      const int rows = pp.pt.rows(tile, pr.n);
      const int last = pr.tokens[pp.pt.first_probe(tile) + rows / pp.pt.group - 1];
      const int64_t ld = pp.n_cached + last + 1;  // keys the tile's last probe sees
      if (s.tile_logits.size() < static_cast<size_t>(rows * ld)) s.tile_logits.resize(static_cast<size_t>(rows * ld));
      float* lg = s.tile_logits.data();  // [rows, ld]
      gather_probe_q(q, shape, pr, pp.pt, g, tile, s.qt.data());
      int qt2_id = 0;
      // Cached keys in no chunk (their pages were freed: out of a sliding window) score -inf.
      int64_t covered = 0;
      for (size_t c = pp.hb[g]; c < pp.hb[g + 1]; ++c) covered += pp.cs[c].k.n_tokens;
      const bool gaps = covered < pp.n_cached;
      if (gaps)
        for (int r = 0; r < rows; ++r) std::fill(lg + static_cast<int64_t>(r) * ld, lg + static_cast<int64_t>(r) * ld + pp.n_cached, attn::kNegInf);
      for (size_t c = pp.hb[g]; c < pp.hb[g + 1]; ++c)
        score_chunk(pp.cs[c], s, rows, pp.d, scale, lg + pp.cs[c].first, ld, qt2_id);
      const uint8_t* page[1] = {reinterpret_cast<const uint8_t*>(&pp.keys[static_cast<size_t>(g) * n_new * pp.d])};
      for (int64_t j0 = 0; j0 <= last; j0 += kChunkTokens) {
        const Chunk c = attn::f32_rows_chunk(f32, page, page, j0, std::min<int64_t>(kChunkTokens, last + 1 - j0), n_new, pp.d);
        score_chunk(c, s, rows, pp.d, scale, lg + pp.n_cached + j0, ld, qt2_id);
      }
      float* mass = part + task * pp.n_keys;  // [n_keys]
      for (int r = 0; r < rows; ++r) {
        const int p = pp.pt.first_probe(tile) + r / pp.pt.group;
        const int64_t valid = pp.n_cached + pr.tokens[p] + 1;
        float* lr = lg + static_cast<int64_t>(r) * ld;
        const float m = attn::max_of(lr, valid);
        double l = 0.0;  // in kChunkTokens pieces, as the attention sums
        for (int64_t t0 = 0; t0 < valid; t0 += kChunkTokens)
          l += attn::exp_sub_sum(lr + t0, std::min(kChunkTokens, valid - t0), m);
        if (gaps) {  // the vector exp flushes -inf to ~1e-38: freed keys get exactly 0
          int64_t t = 0;
          for (size_t c = pp.hb[g]; c <= pp.hb[g + 1]; ++c) {
            const int64_t next = c < pp.hb[g + 1] ? pp.cs[c].first : pp.n_cached;
            std::fill(lr + t, lr + next, 0.0f);
            if (c < pp.hb[g + 1]) t = pp.cs[c].first + pp.cs[c].k.n_tokens;
          }
        }
        const int64_t slot = static_cast<int64_t>(p) * shape.n_heads + g * pp.pt.group + r % pp.pt.group;
        pr.m[slot] = m;
        pr.l[slot] = l;
        const float inv_l = static_cast<float>(1.0 / l);
        for (int64_t t = 0; t < valid; ++t) mass[t] += lr[t] * inv_l;
        if (probe_maps) {  // keys past `valid` stay 0: this probe cannot see them
          float* row = probe_maps + slot * pp.n_keys;
          for (int64_t t = 0; t < valid; ++t) row[t] = lr[t] * inv_l;
        }
      }
    }
  });
  return part;
}

// Probe pass 2: the tiles of each head summed, divided by the number of probes that see each key.
void sum_tile_masses(const ProbePass& pp, const float* part, const ProbeRows& pr, float* key_mass, ThreadPool& pool) {
  const int64_t n_key_chunks = (pp.n_keys + kChunkTokens - 1) / kChunkTokens;
  pool.parallel_for(static_cast<int64_t>(pp.n_kv) * n_key_chunks, [&](int64_t begin, int64_t end, int) {
    for (int64_t task = begin; task < end; ++task) {
      const int g = static_cast<int>(task / n_key_chunks);
      const int64_t t0 = task % n_key_chunks * kChunkTokens, t1 = std::min(pp.n_keys, t0 + kChunkTokens);
      float* mass = key_mass + g * pp.n_keys;
      for (int tile = 0; tile < pp.pt.n_tiles; ++tile) {
        const float* src = part + (static_cast<int64_t>(g) * pp.pt.n_tiles + tile) * pp.n_keys;
        for (int64_t t = t0; t < t1; ++t) mass[t] += src[t];
      }
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t seen = t < pp.n_cached ? pr.n
                                             : pr.tokens + pr.n - std::lower_bound(pr.tokens, pr.tokens + pr.n,
                                                                                   static_cast<int>(t - pp.n_cached));
        mass[t] = seen > 0 ? mass[t] / static_cast<float>(seen) : 0.0f;
      }
    }
  });
}

}  // namespace

void probe_stats(const LayerCache& layer, const LayerCache* key_source, const Codec& f32, const float* q,
                 const float* k, int n_new, float scale, const AttendShape& shape, ProbeRows& pr, float* key_mass,
                 ThreadPool& pool, float* probe_maps) {
  const ProbePass pp = start_probe_pass(layer, key_source, k, n_new, shape, pr.n, key_mass, probe_maps);
  if (pr.n == 0) return;
  const float* part = tile_masses(pp, f32, q, n_new, scale, shape, pr, pool, probe_maps);
  sum_tile_masses(pp, part, pr, key_mass, pool);
}

void probe_key_mass(const LayerCache& layer, const LayerCache* key_source, const Codec& f32, const float* q,
                    const float* k, int n_new, float scale, const AttendShape& shape, const ProbeRows& pr,
                    float* key_mass, ThreadPool& pool, float* probe_maps) {
  const ProbePass pp = start_probe_pass(layer, key_source, k, n_new, shape, pr.n, key_mass, probe_maps);
  if (pr.n == 0) return;
  // New keys past the last probe are seen by none: their mass stays 0.
  const int64_t n_new_chunks = (pr.tokens[pr.n - 1] + kChunkTokens) / kChunkTokens;
  // Task = (kv head, one chunk of its keys): every probe row over that chunk, so tasks
  // write disjoint ranges of key_mass.
  std::vector<int64_t> task_begin(pp.n_kv + 1, 0);  // [n_kv + 1] prefix counts of tasks per head
  for (int g = 0; g < pp.n_kv; ++g)
    task_begin[g + 1] = task_begin[g] + static_cast<int64_t>(pp.hb[g + 1] - pp.hb[g]) + n_new_chunks;

  pool.parallel_for(task_begin[pp.n_kv], [&](int64_t begin, int64_t end, int) {
    StatScratch& s = scratch(pp.d);
    for (int64_t task = begin; task < end; ++task) {
      const int g = static_cast<int>(std::upper_bound(task_begin.begin(), task_begin.end(), task) - task_begin.begin()) - 1;
      const int64_t local = task - task_begin[g];
      const int64_t n_cached_chunks = static_cast<int64_t>(pp.hb[g + 1] - pp.hb[g]);
      const uint8_t* page[1] = {reinterpret_cast<const uint8_t*>(&pp.keys[static_cast<size_t>(g) * n_new * pp.d])};
      const bool is_new = local >= n_cached_chunks;
      const int64_t j0 = is_new ? (local - n_cached_chunks) * kChunkTokens : 0;
      const Chunk c = is_new ? attn::f32_rows_chunk(f32, page, page, j0, std::min<int64_t>(kChunkTokens, n_new - j0),
                                                    n_new, pp.d)
                             : pp.cs[pp.hb[g] + local];
      const int64_t n = c.k.n_tokens;
      const int64_t key0 = is_new ? pp.n_cached + j0 : c.first;  // the chunk's first key in step key order
      float* mass = key_mass + g * pp.n_keys + key0;              // [n]
      // Probes that see none of a new chunk (token < j0) come first: skip them.
      const int first_probe = is_new ? static_cast<int>(std::lower_bound(pr.tokens, pr.tokens + pr.n, j0) - pr.tokens) : 0;
      for (int tile = first_probe / pp.pt.tile_probes; tile < pp.pt.n_tiles; ++tile) {
        const int rows = pp.pt.rows(tile, pr.n);
        gather_probe_q(q, shape, pr, pp.pt, g, tile, s.qt.data());
        if (s.logits.size() < static_cast<size_t>(rows * n)) s.logits.resize(static_cast<size_t>(rows * n));
        int qt2_id = 0;
        score_chunk(c, s, rows, pp.d, scale, s.logits.data(), n, qt2_id);
        for (int r = 0; r < rows; ++r) {
          const int p = pp.pt.first_probe(tile) + r / pp.pt.group;
          const int64_t valid = is_new ? std::clamp<int64_t>(pr.tokens[p] - j0 + 1, 0, n) : n;
          if (valid == 0) continue;
          const int64_t slot = static_cast<int64_t>(p) * shape.n_heads + g * pp.pt.group + r % pp.pt.group;
          float* lr = s.logits.data() + static_cast<int64_t>(r) * n;
          attn::exp_sub_sum(lr, valid, pr.m[slot]);
          const float inv_l = static_cast<float>(1.0 / pr.l[slot]);
          for (int64_t t = 0; t < valid; ++t) mass[t] += lr[t] * inv_l;
          if (probe_maps) {  // keys past `valid` stay 0: this probe cannot see them
            float* row = probe_maps + slot * pp.n_keys + key0;
            for (int64_t t = 0; t < valid; ++t) row[t] = lr[t] * inv_l;
          }
        }
      }
      // Causal normalization: divide by the number of probes that see each key.
      for (int64_t t = 0; t < n; ++t) {
        const int64_t seen =
            is_new ? pr.tokens + pr.n - std::lower_bound(pr.tokens, pr.tokens + pr.n, static_cast<int>(j0 + t)) : pr.n;
        mass[t] = seen > 0 ? mass[t] / static_cast<float>(seen) : 0.0f;
      }
    }
  });
}

}  // namespace vlkv
