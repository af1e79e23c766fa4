// KvCache implementation: sequences in a PageTable over a PagePool, attention via
// attend_layer(), storage delegated to the configured Method, and the pending-step
// bookkeeping (per-layer snapshots, pages taken / released) behind commit/rollback.
#include "kv/kv_cache.h"

#include <algorithm>
#include <map>

#include "base/check.h"
#include "kv/attention.h"
#include "kv/attention_stats.h"
#include "kv/codec_registry.h"
#include "kv/kv_sequence_io.h"
#include "kv/method_registry.h"
#include "kv/page_table.h"
#include "kv/window_trim.h"

namespace vlkv {
namespace {

// What the cache requires of a method: its codecs fit the geometry and a page, its plans
// ask only for statistics attend() computes and are consistent.
Status check_method(const Method& method, const KvCacheConfig& config) {
  const KvGeometry& g = config.geometry;
  for (const Codec* c : method.codecs()) {
    VLKV_RETURN_IF_ERROR(c->check_head_dim(g.head_dim));
    if (c->block_bytes(g.head_dim) > (int64_t{1} << 30))  // a stream's page holds at least one block
      return invalid_argument("codec " + c->name() + ": a block of " + std::to_string(c->block_bytes(g.head_dim)) +
                              " bytes is too large");
  }
  for (int l = 0; l < g.n_layers; ++l) {
    const LayerPlan plan = method.layer_plan(l);
    if (plan.stats & ~uint32_t{kStatKeyMass | kStatProbeMaps})
      return unsupported("KV method " + method.spec() + " needs attention statistics not computed yet");
    if (plan.sparse_attention && (!(plan.stats & kStatKeyMass) || !method.key_selector()))
      return Status(StatusCode::kInternal, "sparse attention needs kStatKeyMass and a KeySelector");
    if (!plan.stores_k && (plan.score_layer < 0 || plan.score_layer >= l))
      return Status(StatusCode::kInternal, "a layer without K needs an earlier score_layer");
  }
  return Status::ok();
}

// The method of a spec, checked against the cache; its refusals are ErrorKind::kKvMethod
// (the CLI names the flag that gave the spec).
Result<std::unique_ptr<Method>> create_checked_method(std::string_view spec, const KvCacheConfig& config) {
  Result<std::unique_ptr<Method>> m = create_method(spec, config.geometry);
  if (!m.is_ok()) return m.status().with_kind(ErrorKind::kKvMethod);
  if (Status st = check_method(**m, config); !st.is_ok()) return st.with_kind(ErrorKind::kKvMethod);
  return m;
}

class KvCacheImpl final : public KvCache {
 public:
  KvCacheImpl(const KvCacheConfig& config, std::unique_ptr<Method> method, std::shared_ptr<const Codec> f32)
      : config_(config), method_(std::move(method)), f32_(std::move(f32)),
        pool_(config.budget_bytes, config.page_bytes), table_(pool_) {}

  Result<SeqId> add_sequence(const std::string& spec) override {
    const KvGeometry& g = config_.geometry;
    VLKV_ASSIGN_OR_RETURN(const Method* method, method_for(spec));
    SequenceCache seq;
    seq.method = method;
    seq.layers.resize(g.n_layers);
    for (int l = 0; l < g.n_layers; ++l) {
      seq.layers[l].heads.resize(g.n_kv_heads);
      seq.layers[l].state = method->new_layer_state(l);
    }
    if (const SequencePolicy* policy = method->sequence_policy()) seq.state = policy->new_sequence_state();
    return table_.add(std::move(seq));
  }
  std::string sequence_method(SeqId seq) const override { return get(seq).method->spec(); }
  uint32_t page_bytes() const override { return pool_.page_bytes(); }
  Result<double> method_bits_per_element(const std::string& spec) override {
    VLKV_ASSIGN_OR_RETURN(const Method* m, method_for(spec));
    return m->bits_per_element();
  }
  Result<double> method_bytes_for_tokens(int64_t n_tokens, const std::string& spec) override {
    VLKV_ASSIGN_OR_RETURN(const Method* m, method_for(spec));
    return m->bytes_for_tokens(n_tokens);
  }
  Result<uint64_t> max_bytes_for_tokens(int64_t n_tokens, const std::string& spec) override {
    VLKV_ASSIGN_OR_RETURN(const Method* m, method_for(spec));
    const KvGeometry& g = config_.geometry;
    double codec = m->bytes_for_tokens(n_tokens);
    // Sliding-window layers hold their window's tokens (codec bytes at the steady rate) plus
    // what the method stages (never freed early), and one layer at a time holds its whole
    // step until it is trimmed. Methods store the same in every layer: a layer's share is 1/L.
    const double steady = m->bytes_per_token() * static_cast<double>(n_tokens);
    if (config_.free_out_of_window && !m->shares_keys_across_layers()) {
      const double per_layer = codec / g.n_layers, staged = std::max(0.0, codec - steady) / g.n_layers;
      double held = 0.0;
      bool trimmed = false;
      for (int l = 0; l < g.n_layers; ++l) {
        const int64_t w = g.window(l);
        const bool slides = w > 0 && w < n_tokens;
        held += slides ? m->bytes_per_token() * static_cast<double>(w) / g.n_layers + staged : per_layer;
        trimmed = trimmed || slides;
      }
      if (trimmed) codec = std::min(codec, held + per_layer);
    }
    const uint64_t n_streams = static_cast<uint64_t>(g.n_layers) * g.n_kv_heads * m->max_streams_per_head();
    // A step that folds a window holds its old pages until commit (deferred frees): at most
    // the window's bytes again, which is what the sequence holds beyond the steady state.
    const double window = std::max(0.0, m->bytes_for_tokens(n_tokens) - steady);
    // A stream's page: the pool's page size, or one block where a block is larger.
    uint64_t page = pool_.page_bytes();
    for (const Codec* c : m->codecs()) page = std::max<uint64_t>(page, static_cast<uint64_t>(c->block_bytes(g.head_dim)));
    return static_cast<uint64_t>(codec + window) + 2 * n_streams * page;
  }

  void remove_sequence(SeqId seq) override { table_.remove(seq); }
  Status copy_sequence(SeqId src, SeqId dst) override { return table_.copy(src, dst); }

  int64_t n_tokens(SeqId seq) const override { return get(seq).n_tokens; }
  int64_t layer_tokens(SeqId seq, int layer) const override {
    VLKV_CHECK(layer >= 0 && layer < config_.geometry.n_layers);
    return get(seq).layers[layer].n_tokens;
  }

  Status attend(SeqId seq_id, int layer, const float* q, const float* k, const float* v, const TokenKind* kinds,
                int n_new, float scale, float* out, ThreadPool& pool, const float* visual_similarity,
                bool non_causal) override;
  Status store_without_attention(SeqId seq_id, int layer, const float* k, const float* v, const TokenKind* kinds,
                                 int n_new, const float* q, float scale, ThreadPool* pool) override;

  void commit(SeqId seq_id, int n_new) override {
    SequenceCache& seq = get(seq_id);
    if (!seq.pending.active()) {
      VLKV_CHECK_MSG(n_new == 0, "commit without attend()");
      return;
    }
    VLKV_CHECK_MSG(seq.pending.n_new == n_new, "commit count differs from the attended step");
    for (const auto& layer : seq.layers)
      VLKV_CHECK_MSG(layer.n_tokens == seq.n_tokens + n_new, "commit before every layer was attended");
    for (PageId p : seq.pending.deferred_free) pool_.free(p);
    seq.pending = PendingStep{};  // drops the sequence state's snapshot too
    seq.n_tokens += n_new;
  }

  void rollback(SeqId seq_id) override { rollback(get(seq_id)); }

  uint64_t bytes_in_use() const override { return pool_.bytes_in_use(); }
  uint64_t budget_bytes() const override { return pool_.budget_bytes(); }
  double bits_per_element() const override { return method_->bits_per_element(); }
  std::string method_name() const override { return method_->spec(); }
  bool uses_visual_similarity() const override { return method_->uses_visual_similarity(); }
  bool sequence_uses_visual_similarity(SeqId seq) const override { return get(seq).method->uses_visual_similarity(); }
  std::string without_visual_tokens() const override { return method_->without_visual_tokens(); }
  std::string describe_sequence(SeqId seq) const override {
    const SequencePolicy* policy = get(seq).method->sequence_policy();
    return policy ? policy->describe_sequence(get(seq).state.get()) : std::string();
  }
  double bytes_per_token() const override { return method_->bytes_per_token(); }
  LayerPlan next_step_plan(SeqId seq_id, int layer, int n_new) const override {
    VLKV_CHECK(layer >= 0 && layer < config_.geometry.n_layers);
    const SequenceCache& seq = get(seq_id);
    if (seq.pending.active()) return seq.pending.plans[layer];
    return plan_for_step(*seq.method, layer, seq.state.get(), n_new);
  }
  double stored_bytes(SeqId seq_id) const override {
    double bytes = 0;
    for (const LayerCache& lc : get(seq_id).layers)
      for (const HeadCache& h : lc.heads)
        for (const Segment& s : h.segments)
          for (const Stream* st : {&s.k, &s.v})
            if (st->present())  // blocks of pages still held (freed pages: tokens out of a sliding window)
              bytes += static_cast<double>(st->block_bytes) *
                       static_cast<double>(s.n_tokens / st->codec->tokens_per_block() - st->n_freed_pages * st->blocks_per_page);
    return bytes;
  }
  Status save_sequence(SeqId seq, std::string* out) const override {
    return save_sequence_cache(get(seq), config_.geometry, out);
  }
  Status save_sequence(SeqId seq, ByteSink* out) const override {
    return save_sequence_cache(get(seq), config_.geometry, out);
  }
  Result<SeqId> load_sequence(const std::string& spec, const uint8_t* data, size_t size) override {
    VLKV_ASSIGN_OR_RETURN(const Method* method, method_for(spec));
    SequenceCache seq;
    VLKV_RETURN_IF_ERROR(
        load_sequence_cache(data, size, *method, config_.geometry, config_.max_tokens_per_seq, pool_, &seq));
    return table_.add(std::move(seq));
  }
  uint64_t sequence_bytes(SeqId seq) const override {
    return table_.n_bytes(seq);
  }

  Status read_back(SeqId seq_id, int layer, int kv_head, std::vector<float>* k,
                   std::vector<float>* v) const override {
    const KvGeometry& g = config_.geometry;
    if (layer < 0 || layer >= g.n_layers || kv_head < 0 || kv_head >= g.n_kv_heads)
      return invalid_argument("read_back: layer or kv head out of range");
    const SequenceCache* seq = table_.find(seq_id);
    if (!seq) return invalid_argument("read_back: unknown sequence");
    const LayerCache& lc = seq->layers[layer];
    const int d = g.head_dim;
    k->assign(static_cast<size_t>(lc.n_tokens) * d, 0.0f);
    v->assign(k->size(), 0.0f);
    int64_t row = 0;
    for (const Segment& s : lc.heads[kv_head].segments) {
      if (s.k.present()) read_stream(s.k, 0, s.n_tokens, d, k->data() + row * d);
      read_stream(s.v, 0, s.n_tokens, d, v->data() + row * d);
      row += s.n_tokens;
    }
    if (row != lc.n_tokens) return Status(StatusCode::kInternal, "read_back: segments hold a different token count");
    // Methods storing out of sequence order say where each stored row belongs.
    std::vector<int64_t> pos;
    if (!seq->method->stored_positions(lc.state.get(), kv_head, lc.heads[kv_head].segments, &pos)) return Status::ok();
    if (static_cast<int64_t>(pos.size()) != lc.n_tokens)
      return Status(StatusCode::kInternal, "read_back: the method's positions do not cover the stored tokens");
    std::vector<float> ks(k->size()), vs(v->size());
    std::vector<uint8_t> seen(pos.size(), 0);
    for (size_t r = 0; r < pos.size(); ++r) {
      if (pos[r] < 0 || pos[r] >= lc.n_tokens || seen[pos[r]]++)
        return Status(StatusCode::kInternal, "read_back: the method's positions are not a permutation");
      std::copy_n(k->data() + r * d, d, ks.data() + pos[r] * d);
      std::copy_n(v->data() + r * d, d, vs.data() + pos[r] * d);
    }
    k->swap(ks);
    v->swap(vs);
    return Status::ok();
  }

 private:
  SequenceCache& get(SeqId seq) {
    SequenceCache* s = table_.find(seq);
    VLKV_CHECK_MSG(s != nullptr, "unknown sequence id");
    return *s;
  }
  const SequenceCache& get(SeqId seq) const {
    const SequenceCache* s = table_.find(seq);
    VLKV_CHECK_MSG(s != nullptr, "unknown sequence id");
    return *s;
  }

  void rollback(SequenceCache& seq) {
    if (!seq.pending.active()) return;
    for (size_t l = 0; l < seq.layers.size(); ++l)
      if (seq.pending.before[l]) seq.layers[l] = std::move(*seq.pending.before[l]);
    for (PageId p : seq.pending.new_pages) pool_.free(p);
    if (seq.pending.state_before) seq.state = std::move(seq.pending.state_before);
    seq.pending = PendingStep{};  // deferred frees are back in the restored layers
  }

  // A layer's step, shared by attend() and store_without_attention(): checks, and the
  // layer's pre-step snapshot for rollback.
  Result<SequenceCache*> begin_layer_step(SeqId seq_id, int layer, const float* k, const float* v, int n_new);
  // The method stores the step's new tokens of layer in.layer; on error the step is rolled back.
  Status store_layer_step(SeqId seq_id, SequenceCache& seq, const StoreInput& in);
  // The window of a layer's K streams: its own, or wider when later layers read its keys.
  int64_t key_window(const Method& method, int layer) const;
  // What the method edits one layer of a sequence through (its sequence state attached).
  LayerEditor editor_for(SequenceCache& seq, int layer) {
    LayerEditor e(pool_, seq.layers[layer], seq.pending, layer, config_.geometry.head_dim);
    e.set_sequence_state(seq.state.get());
    return e;
  }
  // Method::before_attention for the step's layer (before anything reads it); on error the
  // step is rolled back.
  Status prepare_layer(SequenceCache& seq, const StoreInput& in) {
    const SequencePolicy* policy = seq.method->sequence_policy();
    if (!policy) return Status::ok();
    LayerEditor editor = editor_for(seq, in.layer);
    Status st = policy->before_attention(in, editor);
    if (st.is_ok()) return st;
    rollback(seq);
    return st.with_context("preparing layer " + std::to_string(in.layer));
  }
  // Whether the plan asks for probe statistics in a step of n_new tokens.
  static bool wants_stats(const LayerPlan& plan, int n_new) {
    return (plan.stats & (kStatKeyMass | kStatProbeMaps)) && (n_new > 1 || plan.stats_in_decode);
  }
  // One layer's attention call: the cache's layer and keys, the step's rows.
  struct LayerAttention {
    const LayerCache& layer;
    const LayerCache* key_source;  // segments without K take their keys from here (attend_layer)
    const float *q, *k, *v;        // [n_new, n_heads | n_kv_heads, head_dim]
    int n_new;
    float scale;
    float* out;  // [n_new, n_heads, head_dim]
    ThreadPool& pool;
  };
  // The queries and keys one layer attends with (LayerPlan::score_layer): the caller's, or
  // the sharing layer's kept this step. alt_q, alt_k (base_scores): the sharing layer's, for
  // its visual keys. q null: the sharing layer was not attended this step.
  struct StepQk {
    const float* q = nullptr;
    const float* k = nullptr;
    const float* alt_q = nullptr;
    const float* alt_k = nullptr;
  };
  StepQk step_qk(SequenceCache& seq, int layer, const LayerPlan& plan, const float* q, const float* k,
                 const TokenKind* kinds);
  // Keeps a layer's q and k for the later layers of the step whose plans share them.
  void keep_shared_qk(SequenceCache& seq, int layer, const StepQk& qk);
  const LayerCache* key_source(const SequenceCache& seq, const LayerPlan& plan, int layer) const;
  // The layer's sliding window and causality as attend_layer options; on error rolled back.
  Status step_mask(SequenceCache& seq, int layer, bool non_causal, AttendOptions& mask);
  void run(const LayerAttention& a, const AttendOptions& o) const;
  // Attention that also collects the plan's statistics (and, sparse, attends the keys the
  // method selects from them).
  Status attend_with_stats(SequenceCache& seq, const LayerPlan& plan, const LayerAttention& a, const AttendOptions& mask,
                           StoreInput& in, AttentionStats& stats);
  // Chooses the step's probes and sizes the statistics buffers for `plan`; stats points
  // into them. The caller fills the rows' softmax state (ProbeRows) and the key mass.
  ProbeRows begin_stats(const LayerPlan& plan, const LayerCache& lc, int layer, int n_new, AttentionStats& stats);

  // The method of a spec ("": the configured one), created on first use and kept: sequences
  // point at it. Checked like the configured one (codec blocks fit a page).
  Result<const Method*> method_for(const std::string& spec);

  KvCacheConfig config_;
  std::unique_ptr<Method> method_;  // the configured method
  std::vector<std::unique_ptr<Method>> owned_methods_;  // the other methods sequences asked for
  std::map<std::string, const Method*> methods_by_spec_;  // by spec as asked and by canonical spec
  std::shared_ptr<const Codec> f32_;  // runs the fused kernels over the new tokens
  // Per-step statistics buffers, reused across steps.
  std::vector<int> probes_;      // [n_probes] step token indices
  std::vector<float> probe_m_;   // [n_probes, n_heads]
  std::vector<double> probe_l_;  // [n_probes, n_heads]
  std::vector<float> key_mass_;  // [n_kv_heads, n_cached + n_new]
  std::vector<float> probe_maps_;  // [n_probes, n_heads, n_cached + n_new] (kStatProbeMaps)
  std::vector<uint8_t> keep_;    // [n_kv_heads, n_cached + n_new] sparse attention's kept keys
  std::vector<int64_t> cached_pos_;  // [n_kv_heads, n_cached] sliding layers: stored keys' positions
  std::vector<float> mixed_k_;       // [n_new, n_kv_heads, head_dim] own keys with a sharing layer's visual rows
  PagePool pool_;
  PageTable table_;
};

Result<const Method*> KvCacheImpl::method_for(const std::string& spec) {
  if (spec.empty() || spec == config_.method || spec == method_->spec()) return method_.get();
  auto it = methods_by_spec_.find(spec);
  if (it != methods_by_spec_.end()) return it->second;
  VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Method> m, create_checked_method(spec, config_));
  const Method* found = method_.get();
  if (m->spec() != method_->spec()) {
    auto canonical = methods_by_spec_.find(m->spec());
    if (canonical != methods_by_spec_.end()) {
      found = canonical->second;
    } else {
      found = m.get();
      methods_by_spec_.emplace(m->spec(), found);
      owned_methods_.push_back(std::move(m));
    }
  }
  methods_by_spec_.emplace(spec, found);
  return found;
}

Status KvCacheImpl::attend(SeqId seq_id, int layer, const float* q, const float* k, const float* v,
                           const TokenKind* kinds, int n_new, float scale, float* out, ThreadPool& pool,
                           const float* visual_similarity, bool non_causal) {
  if (!q || !out) return invalid_argument("attend: empty step or null buffer");
  VLKV_ASSIGN_OR_RETURN(SequenceCache* seq_ptr, begin_layer_step(seq_id, layer, k, v, n_new));
  SequenceCache& seq = *seq_ptr;
  const LayerPlan& plan = seq.pending.plans[layer];
  std::vector<TokenKind> text_kinds;
  if (!kinds) {
    text_kinds.assign(n_new, TokenKind::kText);
    kinds = text_kinds.data();
  }
  // The queries and keys attention uses: the layer's own, or those of the layer its plan
  // shares with (kept from this step's earlier layer).
  const StepQk qk = step_qk(seq, layer, plan, q, k, kinds);
  if (!qk.q) {
    rollback(seq);
    return Status(StatusCode::kInternal, "attend: layer " + std::to_string(layer) + " shares layer " +
                                             std::to_string(plan.score_layer) + "'s q and k, not attended this step");
  }
  StoreInput in{.layer = layer, .n_cached = seq.layers[layer].n_tokens, .n_new = n_new, .k = qk.k, .v = v,
                .kinds = kinds, .visual_similarity = visual_similarity};
  VLKV_RETURN_IF_ERROR(prepare_layer(seq, in));
  AttendOptions mask;  // what every attention of this step applies: the layer's window, non-causal new tokens
  VLKV_RETURN_IF_ERROR(step_mask(seq, layer, non_causal, mask));
  AttentionStats stats;
  const LayerAttention la{seq.layers[layer], key_source(seq, plan, layer), qk.q, qk.k, v, n_new, scale, out, pool};
  if (wants_stats(plan, n_new)) {
    VLKV_RETURN_IF_ERROR(attend_with_stats(seq, plan, la, mask, in, stats));
  } else {
    AttendOptions o = mask;
    std::vector<uint8_t> from_alt;
    if (qk.alt_q) {  // keys of the shared layer's visual tokens scored with its queries
      from_alt.resize(n_new);
      for (int i = 0; i < n_new; ++i) from_alt[i] = kinds[i] == TokenKind::kVisual;
      o.alt_q = qk.alt_q;
      o.alt_k = qk.alt_k;
      o.from_alt = from_alt.data();
    }
    run(la, o);
  }
  keep_shared_qk(seq, layer, qk);
  return store_layer_step(seq_id, seq, in);
}

KvCacheImpl::StepQk KvCacheImpl::step_qk(SequenceCache& seq, int layer, const LayerPlan& plan, const float* q,
                                         const float* k, const TokenKind* kinds) {
  const int b = plan.score_layer;
  if (b < 0 || b == layer) return {q, k};
  const std::vector<float>& sq = seq.pending.shared_q[b];
  const std::vector<float>& sk = seq.pending.shared_k[b];
  if (sq.empty()) return {};
  if (!plan.visual_only) return {sq.data(), sk.data()};           // its q and k
  if (plan.base_scores) return {q, k, sq.data(), sk.data()};      // its scores of visual keys
  const KvGeometry& g = config_.geometry;                          // its visual keys, own queries
  const int64_t row = static_cast<int64_t>(g.n_kv_heads) * g.head_dim;
  const int n_new = seq.pending.n_new;
  mixed_k_.assign(k, k + n_new * row);
  for (int i = 0; i < n_new; ++i)
    if (kinds[i] == TokenKind::kVisual) std::copy_n(sk.data() + i * row, row, mixed_k_.data() + i * row);
  return {q, mixed_k_.data()};
}

void KvCacheImpl::keep_shared_qk(SequenceCache& seq, int layer, const StepQk& qk) {
  PendingStep& p = seq.pending;
  if (!p.shared_wanted[layer]) return;
  const KvGeometry& g = config_.geometry;
  p.shared_q[layer].assign(qk.q, qk.q + static_cast<int64_t>(p.n_new) * g.n_heads * g.head_dim);
  p.shared_k[layer].assign(qk.k, qk.k + static_cast<int64_t>(p.n_new) * g.n_kv_heads * g.head_dim);
}

const LayerCache* KvCacheImpl::key_source(const SequenceCache& seq, const LayerPlan& plan, int layer) const {
  if (plan.score_layer < 0) return nullptr;
  // The sharing layer already attended this step: its keys as at the last commit (its snapshot).
  const auto& snap = seq.pending.before[plan.score_layer];
  return plan.score_layer != layer && snap ? &*snap : &seq.layers[plan.score_layer];
}

Status KvCacheImpl::step_mask(SequenceCache& seq, int layer, bool non_causal, AttendOptions& mask) {
  const KvGeometry& g = config_.geometry;
  const LayerCache& lc = seq.layers[layer];
  mask.window = g.window(layer);
  mask.non_causal = non_causal;
  if (mask.window <= 0 || lc.n_tokens == 0) return Status::ok();
  // The window is over the cached keys' sequence positions, whatever order the method stores them in.
  cached_pos_.clear();
  std::vector<int64_t> pos;
  for (int h = 0; h < g.n_kv_heads; ++h) {
    if (!seq.method->stored_positions(lc.state.get(), h, lc.heads[h].segments, &pos)) break;
    if (static_cast<int64_t>(pos.size()) != lc.n_tokens) {
      rollback(seq);
      return Status(StatusCode::kInternal, "attend: the method's stored positions do not cover the layer");
    }
    cached_pos_.insert(cached_pos_.end(), pos.begin(), pos.end());
  }
  if (!cached_pos_.empty()) mask.cached_pos = cached_pos_.data();
  return Status::ok();
}

void KvCacheImpl::run(const LayerAttention& a, const AttendOptions& o) const {
  const KvGeometry& g = config_.geometry;
  attend_layer(a.layer, a.key_source, *f32_, a.q, a.k, a.v, a.n_new, a.scale, a.out,
               AttendShape{g.n_heads, g.n_kv_heads, g.head_dim}, a.pool, o);
}

Status KvCacheImpl::attend_with_stats(SequenceCache& seq, const LayerPlan& plan, const LayerAttention& a,
                                      const AttendOptions& mask, StoreInput& in, AttentionStats& stats) {
  const KvGeometry& g = config_.geometry;
  const AttendShape shape{g.n_heads, g.n_kv_heads, g.head_dim};
  ProbeRows rows = begin_stats(plan, a.layer, in.layer, a.n_new, stats);
  float* maps = stats.probe_maps ? probe_maps_.data() : nullptr;
  in.stats = &stats;
  auto probes_only = [&] {
    probe_stats(a.layer, a.key_source, *f32_, a.q, a.k, a.n_new, a.scale, shape, rows, key_mass_.data(), a.pool, maps);
  };
  if (plan.sparse_attention) {  // statistics first, then attention over the keys they select
    // The probes cost what they cost after a full attention (one scoring pass): only the
    // selection is extra. The mask is used only when it skips enough of the work.
    probes_only();
    keep_.clear();
    if (seq.method->key_selector()->select_attended_keys(in, &keep_)) {
      if (keep_.size() != key_mass_.size()) {
        rollback(seq);
        return Status(StatusCode::kInternal, "select_attended_keys: mask of " + std::to_string(keep_.size()) +
                                                 " keys, expected " + std::to_string(key_mass_.size()));
      }
      if (sparse_attention_work(a.layer, a.key_source, keep_.data(), a.n_new, shape) <= kMaxSparseWork) {
        AttendOptions o = mask;
        o.keep = keep_.data();
        run(a, o);
        return Status::ok();
      }
    }
    run(a, mask);
  } else if (mask.window > 0 || mask.non_causal) {
    // The statistics stay those of causal attention over every key (what the method's policy
    // is defined on); the masked attention's softmax state is not theirs: their own pass.
    run(a, mask);
    probes_only();
  } else {
    AttendOptions o = mask;
    o.probe_state = &rows;
    run(a, o);
    probe_key_mass(a.layer, a.key_source, *f32_, a.q, a.k, a.n_new, a.scale, shape, rows, key_mass_.data(), a.pool,
                   maps);
  }
  return Status::ok();
}

ProbeRows KvCacheImpl::begin_stats(const LayerPlan& plan, const LayerCache& lc, int layer, int n_new,
                                   AttentionStats& stats) {
  const KvGeometry& g = config_.geometry;
  // Salt: layer and first position, so steps and layers draw different random probes.
  probes_ = choose_probes(plan.probe, n_new, (static_cast<uint64_t>(layer) << 40) ^ static_cast<uint64_t>(lc.n_tokens));
  probe_m_.resize(probes_.size() * g.n_heads);
  probe_l_.resize(probe_m_.size());
  key_mass_.resize(static_cast<size_t>(g.n_kv_heads) * (lc.n_tokens + n_new));
  stats.key_mass = key_mass_.data();
  stats.probes = probes_.data();
  stats.n_probes = static_cast<int>(probes_.size());
  if (plan.stats & kStatProbeMaps) {
    probe_maps_.resize(probes_.size() * g.n_heads * (lc.n_tokens + n_new));
    stats.probe_maps = probe_maps_.data();
    stats.n_heads = g.n_heads;
  }
  return ProbeRows{probes_.data(), stats.n_probes, probe_m_.data(), probe_l_.data()};
}

Status KvCacheImpl::store_without_attention(SeqId seq_id, int layer, const float* k, const float* v,
                                            const TokenKind* kinds, int n_new, const float* q, float scale,
                                            ThreadPool* pool) {
  const KvGeometry& g = config_.geometry;
  if (!kinds) return invalid_argument("store_without_attention: null token kinds");
  VLKV_ASSIGN_OR_RETURN(SequenceCache* seq, begin_layer_step(seq_id, layer, k, v, n_new));
  const LayerPlan& plan = seq->pending.plans[layer];
  const bool stats_needed = wants_stats(plan, n_new);
  if (stats_needed && (!q || !pool)) {
    rollback(*seq);
    return unsupported("KV method " + seq->method->spec() + " stores with attention statistics: pass queries");
  }
  LayerCache& lc = seq->layers[layer];
  StoreInput in{.layer = layer, .n_cached = lc.n_tokens, .n_new = n_new, .k = k, .v = v, .kinds = kinds};
  VLKV_RETURN_IF_ERROR(prepare_layer(*seq, in));
  AttentionStats stats;
  if (stats_needed) {  // the probe rows only: their softmax state, then the mass (and maps)
    ProbeRows rows = begin_stats(plan, lc, layer, n_new, stats);
    const AttendShape shape{g.n_heads, g.n_kv_heads, g.head_dim};
    ThreadPool& tp = *pool;
    probe_stats(lc, nullptr, *f32_, q, k, n_new, scale, shape, rows, key_mass_.data(), tp,
                stats.probe_maps ? probe_maps_.data() : nullptr);
    in.stats = &stats;
  }
  return store_layer_step(seq_id, *seq, in);
}

Result<SequenceCache*> KvCacheImpl::begin_layer_step(SeqId seq_id, int layer, const float* k, const float* v, int n_new) {
  const KvGeometry& g = config_.geometry;
  SequenceCache* seq_ptr = table_.find(seq_id);
  if (!seq_ptr) return invalid_argument("attend: unknown sequence " + std::to_string(seq_id));
  SequenceCache& seq = *seq_ptr;
  if (layer < 0 || layer >= g.n_layers) return invalid_argument("attend: layer " + std::to_string(layer) + " out of range");
  if (n_new <= 0 || !k || !v) return invalid_argument("attend: empty step or null buffer");
  if (seq.pending.active() && seq.pending.n_new != n_new)
    return invalid_argument("attend: n_new differs from this step's other layers (commit first)");
  if (seq.pending.active() && seq.pending.before[layer])
    return invalid_argument("attend: layer " + std::to_string(layer) + " attended twice in one step");
  if (seq.n_tokens + n_new > config_.max_tokens_per_seq)
    return invalid_argument("attend: sequence would exceed max_tokens_per_seq (" +
                            std::to_string(config_.max_tokens_per_seq) + ")");
  if (!seq.pending.active()) {  // the step's plans, asked once per layer; which layers' q and k to keep
    std::vector<LayerPlan> plans(g.n_layers);
    std::vector<uint8_t> wanted(g.n_layers, 0);
    for (int l = 0; l < g.n_layers; ++l) {
      plans[l] = plan_for_step(*seq.method, l, seq.state.get(), n_new);
      if (plans[l].score_layer > l) return Status(StatusCode::kInternal, "a layer shares the q and k of a later layer");
      if (plans[l].score_layer >= 0 && plans[l].score_layer != l) wanted[plans[l].score_layer] = 1;
    }
    seq.pending.n_new = n_new;
    seq.pending.before.resize(g.n_layers);
    seq.pending.plans = std::move(plans);
    seq.pending.shared_wanted = std::move(wanted);
    seq.pending.shared_q.resize(g.n_layers);
    seq.pending.shared_k.resize(g.n_layers);
    if (seq.state) seq.pending.state_before = seq.state->clone();
  }
  seq.pending.before[layer] = seq.layers[layer].clone_meta();
  return seq_ptr;
}

Status KvCacheImpl::store_layer_step(SeqId seq_id, SequenceCache& seq, const StoreInput& in) {
  LayerCache& lc = seq.layers[in.layer];
  LayerEditor editor = editor_for(seq, in.layer);
  Status st = seq.method->store(in, editor);
  if (!st.is_ok()) {
    const int64_t at = seq.n_tokens + in.n_new;
    rollback(seq);  // the sequence is as it was before this step
    if (st.code() == StatusCode::kOutOfMemory)
      return Status(st.code(), st.message() + " at token " + std::to_string(at) + " (sequence " +
                                   std::to_string(seq_id) + ", layer " + std::to_string(in.layer) +
                                   ", method " + seq.method->spec() + "); raise --kv-budget or choose a smaller method");
    return st.with_context("storing layer " + std::to_string(in.layer));
  }
  lc.n_tokens += in.n_new;
  // Tokens every later query of a sliding-window layer masks: their pages go back to the pool.
  const int64_t window = config_.geometry.window(in.layer);
  if (window > 0 && config_.free_out_of_window)
    free_out_of_window(editor, *seq.method, lc.n_tokens, window, key_window(*seq.method, in.layer));
  return Status::ok();
}

int64_t KvCacheImpl::key_window(const Method& method, int layer) const {
  const KvGeometry& g = config_.geometry;
  if (!method.shares_keys_across_layers()) return g.window(layer);
  int64_t w = g.window(layer);  // the widest window of the layers that may read these keys
  for (int m = layer; m < g.n_layers && w > 0; ++m) w = g.window(m) == 0 ? 0 : std::max<int64_t>(w, g.window(m));
  return w;
}

}  // namespace

Result<std::unique_ptr<KvCache>> KvCache::create(const KvCacheConfig& config) {
  const KvGeometry& g = config.geometry;
  if (g.n_layers <= 0 || g.n_heads <= 0 || g.n_kv_heads <= 0 || g.head_dim <= 0 || g.n_heads % g.n_kv_heads != 0)
    return invalid_argument("KV geometry: need positive n_layers, n_heads, n_kv_heads, head_dim and "
                            "n_heads % n_kv_heads == 0");
  if (config.page_bytes < 64 || config.page_bytes % 64 != 0)
    return invalid_argument("KV page_bytes must be a positive multiple of 64");
  if (config.budget_bytes / config.page_bytes >= (1ull << 31))
    return invalid_argument("KV budget / page_bytes exceeds 2^31 pages; raise page_bytes");
  if (config.max_tokens_per_seq <= 0) return invalid_argument("max_tokens_per_seq must be positive");
  if (!g.layer_window.empty() && static_cast<int>(g.layer_window.size()) != g.n_layers)
    return invalid_argument("KV geometry: layer_window must have one entry per layer");
  for (int32_t w : g.layer_window)
    if (w < 0) return invalid_argument("KV geometry: a negative sliding window");
  VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Method> method, create_checked_method(config.method, config));
  VLKV_ASSIGN_OR_RETURN(std::shared_ptr<const Codec> f32, make_codec("f32"));
  return std::unique_ptr<KvCache>(new KvCacheImpl(config, std::move(method), std::move(f32)));
}

}  // namespace vlkv
