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
#include "kv/kv_types.h"
#include "kv/layer_editor.h"
#include "kv/token_kind.h"

namespace vlkv {

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
  // embedding with the prompt's text token embeddings (salient visual tokens);
  // entries of non-visual tokens are ignored.
  const float* visual_similarity = nullptr;
};

// Opt-in for a method whose decisions span the layers of one sequence (a grouping chosen
// from the sequence's own prompt): per-sequence state, plans that depend on it, and a hook
// that reshapes a layer before its attention when its plan changed.
class SequencePolicy {
 public:
  virtual ~SequencePolicy() = default;
  // Fresh per-sequence state shared by all layers (LayerEditor::sequence_state()); null:
  // none. Cloned with the sequence and restored on rollback like the layer states.
  virtual std::unique_ptr<LayerState> new_sequence_state() const = 0;
  // The plan of one layer for a step of n_new tokens of a sequence in this state (null when
  // it keeps none). A pure function of its arguments: the cache asks it once per layer at
  // the start of each step (plan_for_step).
  virtual LayerPlan step_plan(int layer, const LayerState* sequence_state, int n_new) const = 0;
  // Called before the step's attention of one layer, with the step's inputs (no statistics
  // yet): a layer whose plan changed may reshape its segments first (drop K it no longer reads).
  virtual Status before_attention(const StoreInput& in, LayerEditor& editor) const = 0;
  // What the method decided for one sequence, for reports; empty when nothing.
  virtual std::string describe_sequence(const LayerState* sequence_state) const = 0;
};

// Opt-in for sparse attention (LayerPlan::sparse_attention): called after the probe
// statistics (in.stats; in.k, in.v and in.kinds are the step's) and before the step's
// attention. Returns false to attend every key (e.g. a short step), or fills keep:
// [n_kv_heads, n_cached + n_new] in step key order (AttentionStats), 1 = attended. Every
// query attends the kept keys it can see causally plus its own key, kept or not. 16-token
// granules of cached keys with none kept are skipped; new tokens' kept keys are gathered,
// so the step's new-token attention costs ~ n_new * kept instead of n_new^2 / 2. The cache
// uses the mask only when it leaves at most kMaxSparseWork of the full attention's work
// (attention.h), and attends every key otherwise.
class KeySelector {
 public:
  virtual ~KeySelector() = default;
  virtual bool select_attended_keys(const StoreInput& in, std::vector<uint8_t>* keep) const = 0;
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
  // Encodes one layer's new tokens into the cache. Called once per attend(); an
  // error (OutOfMemory) makes the cache roll the whole step back.
  virtual Status store(const StoreInput& in, LayerEditor& editor) const = 0;
  // True when store() reads StoreInput::visual_similarity: the engine computes it for a
  // prompt's visual tokens (a dot product per visual token) only then.
  virtual bool uses_visual_similarity() const { return false; }
  // How the method degrades on a sequence without visual tokens (a text-only prompt), for
  // a warning; empty when it does not.
  virtual std::string without_visual_tokens() const {
    if (!uses_visual_similarity()) return {};
    return "it keeps salient visual tokens (by similarity to the text) at higher precision; without visual tokens "
           "none is salient";
  }

  // Opt-in interfaces (below); null when the method does not take part.
  virtual const SequencePolicy* sequence_policy() const { return nullptr; }
  virtual const KeySelector* key_selector() const { return nullptr; }

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
  // Lower bound of the same, for methods whose layout depends on the data (an
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
  // after segment), for methods that store tokens out of sequence order (keeping
  // important and other tokens apart); false: storage order is sequence order.
  // KvCache::read_back returns rows in sequence order with it.
  virtual bool stored_positions(const LayerState* /*state*/, int /*kv_head*/, const std::vector<Segment>& /*segments*/,
                                std::vector<int64_t>* /*positions*/) const {
    return false;
  }
};

// The plan of one layer for a step of n_new tokens of a sequence (sequence_state: its
// SequencePolicy state, null without one): the policy's, else layer_plan().
inline LayerPlan plan_for_step(const Method& m, int layer, const LayerState* sequence_state, int n_new) {
  const SequencePolicy* p = m.sequence_policy();
  return p ? p->step_plan(layer, sequence_state, n_new) : m.layer_plan(layer);
}

}  // namespace vlkv
