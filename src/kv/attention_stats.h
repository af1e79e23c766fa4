// Attention statistics of a step (kStatKeyMass): which queries probe the keys, their
// exact softmax state over all keys, and the per-key attention mass they put there,
// normalized for the causal mask. Never an n x n matrix: the mass is summed
// per key as the probe rows' probabilities are produced, chunk by chunk.
//
// Cost: probe_key_mass recomputes the probe rows' logits (scores only, no values) once,
// after a full attention that provided the rows' max and sum; probe_stats (before a
// sparse attention) is the same one pass, keeping the logits until the max and sum are
// known. With 10% of a prefill's queries as probes that is ~10% of the step's attention.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "kv/attention.h"
#include "kv/method.h"

namespace vlkv {

// Step token indices of the probe queries, ascending (see ProbePlan). salt: mixes the
// layer and the step's first position into the seed.
std::vector<int> choose_probes(const ProbePlan& plan, int n_new, uint64_t salt);

// probe_key_mass and the probe rows' softmax state in one scoring pass, for a step whose
// attention comes after its statistics (sparse attention, store without attention): each
// probe tile's logits over every key it sees are kept (a [64, n_keys] float buffer per
// thread) until its rows' max and sum are known. Writes probes.m, probes.l (what
// attend_layer writes to AttendOptions::probe_state) and key_mass / probe_maps as
// probe_key_mass does. f32: the f32 codec (runs the kernels over the new keys).
//   q: [n_new, n_heads, head_dim]; k: [n_new, n_kv_heads, head_dim]
void probe_stats(const LayerCache& layer, const LayerCache* key_source, const Codec& f32, const float* q,
                 const float* k, int n_new, float scale, const AttendShape& shape, ProbeRows& probes, float* key_mass,
                 ThreadPool& pool, float* probe_maps = nullptr);

// key_mass: [n_kv_heads, layer.n_tokens + n_new] in step key order (AttentionStats), the
// normalized score of each key from the probe rows' final softmax state.
// probe_maps (kStatProbeMaps): null, or [n_probes, n_heads, layer.n_tokens + n_new]: each
// probe row's probabilities themselves (AttentionStats::probe_maps).
void probe_key_mass(const LayerCache& layer, const LayerCache* key_source, const Codec& f32, const float* q,
                    const float* k, int n_new, float scale, const AttendShape& shape, const ProbeRows& probes, float* key_mass,
                    ThreadPool& pool, float* probe_maps = nullptr);

}  // namespace vlkv
