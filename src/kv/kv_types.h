// Plain types shared by the KV cache, its methods and the decoder: ids, the model's KV
// geometry, and the per-layer plans and statistics a method asks attention for. Includes
// nothing of the cache, so method.h, the registry and the cache include this, not each other.
#pragma once

#include <cstdint>
#include <vector>

namespace vlkv {

using SeqId = int32_t;

struct KvGeometry {
  int n_layers = 0;
  int n_heads = 0;      // query heads
  int n_kv_heads = 0;   // GQA: n_heads % n_kv_heads == 0
  int head_dim = 0;
  uint64_t model_fingerprint = 0;  // hash of the model's tensor table (0: unknown); Q Cache maps check it
  // [n_layers] or empty (no window anywhere): 0 for a global layer, W > 0 for a sliding-window
  // layer whose query at position p sees only keys at positions > p - W (Gemma 3's local
  // layers). A token's position is its index in the sequence.
  std::vector<int32_t> layer_window{};
  int32_t window(int layer) const { return layer_window.empty() ? 0 : layer_window[static_cast<size_t>(layer)]; }
};

// Attention statistics a method may ask attend() to compute during a step (bit set).
enum AttentionStat : uint32_t {
  kStatNone = 0,
  kStatKeyMass = 1u << 0,  // per key: attention mass from probe queries
  kStatProbeMaps = 1u << 1,  // per probe query and query head: its attention map (comparing layers)
};

// Which of a step's queries probe the keys for kStatKeyMass (by default the last 5% of
// the prompt plus a random 5%): the last max(1, ceil(last_frac * n_new)) tokens plus
// round(random_frac * n_new) of the others drawn without replacement, seeded by seed,
// the layer and the step's first position (choose_probes in attention_stats.h). A
// 1-token decode step's probe is that token.
// evenly > 0 replaces both: min(evenly, n_new) probes evenly spaced over the step, its last
// token included - the same tokens in every layer, so layers' maps can be compared.
struct ProbePlan {
  double last_frac = 0.05;
  double random_frac = 0.05;
  uint64_t seed = 0;
  int evenly = 0;
};

// Filled by attend() for the bits in LayerPlan::stats.
// Key order ("step key order"): the cached keys of the kv head in storage order
// (segment by segment as in the head's segment list, as read_back returns them), then
// the step's new tokens in sequence order.
struct AttentionStats {
  // [n_kv_heads, n_cached + n_new]: the normalized score, exact softmax
  //   score_j = sum over probes i and the query heads h of the GQA group of A_h[i, j]
  //             / (number of probes that can see j)
  // (every probe sees the cached keys; new token j is seen by the probes i >= j).
  // Each probe row of each query head sums to 1 over the keys it sees.
  const float* key_mass = nullptr;
  const int* probes = nullptr;  // [n_probes] step token indices of the probe queries, ascending
  int n_probes = 0;
  // kStatProbeMaps: [n_probes, n_heads, n_cached + n_new] in step key order: probe i's
  // softmax row of query head h (0 for the new keys it cannot see; each row sums to 1).
  const float* probe_maps = nullptr;
  int n_heads = 0;
};

// What attention does for one (sequence, layer) in one step: the keys it reads, whose scores
// it reuses, the statistics it collects.
struct LayerPlan {
  // score_layer >= 0 (an earlier layer, or this one: none): the layer shares that layer's
  // queries and keys. The cache keeps that layer's q and k of the step, so every layer
  // still passes its own to attend(). stores_k = false: the layer stores no K; its V
  // segments mirror score_layer's one for one (same index, same token counts), attention
  // takes those segments' keys and the step's new keys and queries are score_layer's.
  bool stores_k = true;
  int score_layer = -1;
  // Only the visual tokens' keys come from score_layer (K-less segments of visual tokens;
  // the step's visual rows of k are score_layer's); text tokens keep their own K.
  bool visual_only = false;
  // With visual_only: the visual keys are scored with score_layer's queries (its scores of
  // those keys); false: with the layer's own queries.
  bool base_scores = false;
  uint32_t stats = kStatNone;  // AttentionStat bits needed before store()
  // false: statistics only for steps of more than one token; 1-token (decode) steps skip
  // the extra scoring pass (for methods that read only the prefill's statistics).
  bool stats_in_decode = true;
  ProbePlan probe;             // probe queries of kStatKeyMass
  // Sparse attention (needs kStatKeyMass and a KeySelector, method.h): the probe statistics
  // are computed before the step's attention, KeySelector::select_attended_keys picks the
  // keys, and all the step's queries then attend only over those (plus themselves)
  // where that skips enough work (see KeySelector).
  bool sparse_attention = false;

  // Whether attention reads the layer's own queries and keys: not when every query and key
  // comes from an earlier layer (then the decoder need not project them).
  bool reads_own_qk(int layer) const { return score_layer < 0 || score_layer == layer || visual_only; }
};

}  // namespace vlkv
