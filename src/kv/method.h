// A KV compression method: per layer it decides which codec(s) incoming tokens get
// and in which segments they land (via LayerEditor), what attention statistics it
// needs, what stays full precision (a recent window is just an f32/f16 segment it
// folds into compressed segments when full), and for Q Cache which layers store no K.
// Methods are immutable after creation; per-(sequence, layer) state lives in LayerState.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kv/codec.h"
#include "kv/kv_cache.h"
#include "kv/layer_editor.h"
#include "kv/token_kind.h"

namespace vlkv {

// Attention statistics a method may ask attend() to compute during a step (bit set).
enum AttentionStat : uint32_t {
  kStatNone = 0,
  kStatKeyMass = 1u << 0,  // per key: attention mass from probe queries (ZipVL, AKVQ-VL pivots)
  kStatProbeMaps = 1u << 1,  // per probe query and query head: its attention map (Q Cache's on-the-fly grouping)
};

// Which of a step's queries probe the keys for kStatKeyMass (ZipVL: the last 5% of the
// prompt plus a random 5%): the last max(1, ceil(last_frac * n_new)) tokens plus
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
  // [n_kv_heads, n_cached + n_new]: ZipVL's normalized score, exact softmax
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

struct LayerPlan {
  // false: the layer stores no K (Q Cache lazy layer). Its V segments mirror the
  // segments of layer score_layer one for one (same index, same token counts) and
  // attention takes those segments' keys; the decoder passes the base layer's q and k
  // for the lazy layer (it computes no projections of its own).
  bool stores_k = true;
  int score_layer = -1;
  // Q Cache VLA: only the visual tokens' keys come from score_layer (K-less segments of
  // visual tokens); text tokens keep their own K (see KvCache::qk_source for what the
  // decoder passes).
  bool visual_only = false;
  // With visual_only: the visual keys are scored with the base layer's queries (the
  // paper's VLA: the base layer's visual scores); false: with the layer's own queries.
  bool base_scores = false;
  uint32_t stats = kStatNone;  // AttentionStat bits needed before store()
  // false: statistics only for steps of more than one token; 1-token (decode) steps skip
  // the extra scoring pass (for methods that read only the prefill's statistics).
  bool stats_in_decode = true;
  ProbePlan probe;             // probe queries of kStatKeyMass
  // Sparse attention (ZipVL's sparse prefill; needs kStatKeyMass): the probe statistics
  // are computed before the step's attention, Method::select_attended_keys picks the
  // keys, and all the step's queries then attend only over those (plus themselves)
  // where that skips enough work (see select_attended_keys).
  bool sparse_attention = false;
};

// One layer's new tokens, handed to store() after attention over them is done.
struct StoreInput {
  int layer = 0;
  int64_t n_cached = 0;  // tokens of this layer already stored (positions of the new ones follow)
  int n_new = 0;
  const float* k = nullptr;  // [n_new, n_kv_heads, head_dim] post-RoPE
  const float* v = nullptr;  // [n_new, n_kv_heads, head_dim]
  const TokenKind* kinds = nullptr;         // [n_new]
  const AttentionStats* stats = nullptr;    // non-null when the plan asked for stats
  // [n_new] or null (not computed): per visual token, the mean dot product of its
  // embedding with the prompt's text token embeddings (VidKV's salient visual tokens);
  // entries of non-visual tokens are ignored.
  const float* visual_similarity = nullptr;
};

class Method {
 public:
  virtual ~Method() = default;

  // Canonical spec with every parameter, e.g. "f16" or "kivi:bits=2,g=32,window=128".
  virtual const std::string& spec() const = 0;
  virtual LayerPlan layer_plan(int /*layer*/) const { return {}; }
  // Every codec the method may store with (the cache checks they fit in a page).
  virtual std::vector<const Codec*> codecs() const = 0;
  // Fresh per-(sequence, layer) state; null when the method keeps none.
  virtual std::unique_ptr<LayerState> new_layer_state(int /*layer*/) const { return nullptr; }
  // Fresh per-sequence state shared by all layers (LayerEditor::sequence_state()), for
  // decisions that span layers (Q Cache's grouping from the prompt); null: none. Cloned
  // with the sequence and restored on rollback like the layer states.
  virtual std::unique_ptr<LayerState> new_sequence_state() const { return nullptr; }
  // The plan of one layer for a step of n_new tokens of a sequence in this state (null when
  // the method keeps none): methods whose plans depend on what a sequence has seen (Q Cache
  // groups layers after the prompt's prefill) override this; the default is layer_plan().
  // Must be a pure function of its arguments: the decoder asks it before the step
  // (KvCache::qk_source) and the cache again at each layer.
  virtual LayerPlan step_plan(int layer, const LayerState* /*sequence_state*/, int /*n_new*/) const {
    return layer_plan(layer);
  }
  // Called by attend() before the step's attention of one layer, with the step's inputs
  // (no statistics yet): a method whose plan changed may reshape the layer's segments
  // first (Q Cache drops the K of a layer that became lazy). Default: nothing.
  virtual Status before_attention(const StoreInput& /*in*/, LayerEditor& /*editor*/) const { return Status::ok(); }

  // Encodes one layer's new tokens into the cache. Called once per attend(); an
  // error (OutOfMemory) makes the cache roll the whole step back.
  virtual Status store(const StoreInput& in, LayerEditor& editor) const = 0;
  // True when store() reads StoreInput::visual_similarity: the engine computes it for a
  // prompt's visual tokens (a dot product per visual token) only then.
  virtual bool uses_visual_similarity() const { return false; }
  // What the method decided for one sequence (Q Cache: its lazy layers), for reports;
  // empty when nothing is decided per sequence.
  virtual std::string describe_sequence(const LayerState* /*sequence_state*/) const { return {}; }
  // How the method degrades on a sequence without visual tokens (a text-only prompt), for
  // a warning; empty when it does not.
  virtual std::string without_visual_tokens() const {
    if (!uses_visual_similarity()) return {};
    return "it keeps salient visual tokens (by similarity to the text) at higher precision; without visual tokens "
           "none is salient";
  }

  // LayerPlan::sparse_attention: called after the probe statistics (in.stats; in.k, in.v
  // and in.kinds are the step's) and before the step's attention. Returns false to attend
  // every key (e.g. a short step), or fills keep: [n_kv_heads, n_cached + n_new] in step
  // key order (AttentionStats), 1 = attended. Every query attends the kept keys it can
  // see causally plus its own key, kept or not. 16-token granules of cached keys with
  // none kept are skipped; new tokens' kept keys are gathered, so the step's new-token
  // attention costs ~ n_new * kept instead of n_new^2 / 2. The cache uses the mask only
  // when it leaves at most kMaxSparseWork of the full attention's work (attention.h),
  // and attends every key otherwise.
  virtual bool select_attended_keys(const StoreInput& /*in*/, std::vector<uint8_t>* /*keep*/) const {
    return false;
  }

  // Steady-state stored bits per K/V element including metadata (long contexts,
  // excluding page tails and a not-yet-folded window).
  virtual double bits_per_element() const = 0;
  // Steady-state bytes per token over all layers, kv heads, K and V.
  virtual double bytes_per_token() const = 0;
  // Round-trip bound: |stored - x| <= error_bound() * max|x| over the token's head
  // vector (or the codec block); 0 for lossless methods.
  virtual double error_bound() const = 0;
  // Relative RMS round-trip error sqrt(sum (stored - x)^2 / sum x^2) over a head's stored
  // rows of i.i.d. data (K and V apart), for 1.x-bit methods whose max-abs error_bound()
  // is true but uninformative; negative: not declared.
  virtual double rms_error_bound() const { return -1.0; }

  // ---- exact accounting and test declarations (defaults: one segment, no window) ----
  // Bytes of codec blocks (page tails excluded) a sequence holds once n_tokens are
  // stored, a full-precision window included (bytes_per_token() excludes it).
  virtual double bytes_for_tokens(int64_t n_tokens) const { return bytes_per_token() * static_cast<double>(n_tokens); }
  // Lower bound of the same, for methods whose layout depends on the data (ZipVL's
  // important-token mix): then bytes_for_tokens() is the upper bound ("at most", what
  // reports show).
  virtual double min_bytes_for_tokens(int64_t n_tokens) const { return bytes_for_tokens(n_tokens); }
  // True when a layer's attention may read another (earlier) layer's keys, now or after a
  // later step regroups layers (Q Cache): a sliding-window layer then keeps its K pages for
  // the widest window of the layers after it (window_trim.h).
  virtual bool shares_keys_across_layers() const { return false; }
  // Streams (K and V of each segment) one (layer, kv head) holds at most after a step;
  // each may end in a partly used page, so held - bytes_for_tokens() < this * pages.
  virtual int max_streams_per_head() const { return 2; }
  // error_bound() is relative to max|x| over this many consecutive tokens of a head
  // (aligned in sequence order: tokens [kB, (k+1)B)), e.g. per-channel groups of G.
  virtual int error_block_tokens() const { return 1; }
  // Sequence positions of one (layer, kv head)'s stored tokens in storage order (segment
  // after segment), for methods that store tokens out of sequence order (ZipVL keeps
  // important and other tokens apart); false: storage order is sequence order.
  // KvCache::read_back returns rows in sequence order with it.
  virtual bool stored_positions(const LayerState* /*state*/, int /*kv_head*/, const std::vector<Segment>& /*segments*/,
                                std::vector<int64_t>* /*positions*/) const {
    return false;
  }
};

}  // namespace vlkv
