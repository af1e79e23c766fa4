// Scheduler (include/vlkv/scheduler.h): a queue of requests, admission by reserved KV
// bytes, one TextDecoder::forward_batch per step over every running request (a prompt
// chunk or one decode token each), sampling, and preemption by recompute when the pool
// runs dry. The lock guards the request table; the forward pass runs without it.
#include "vlkv/scheduler.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "base/check.h"
#include "base/log.h"
#include "engine/decoder_feed.h"
#include "engine/engine_impl.h"
#include "engine/media_cache.h"
#include "engine/prefix_blob.h"
#include "engine/prefix_cache.h"
#include "engine/prefix_keys.h"
#include "engine/sampler.h"
#include "kv/page_pool.h"

namespace vlkv {

namespace {

// One request and its sequence.
struct Active {
  RequestId id = 0;
  uint64_t cache_owner = 0;  // Request::cache_owner
  std::shared_ptr<const PreparedPrompt> prepared;  // keeps the media embeddings alive
  PromptLayout prompt;                     // its rows at positions 0..; next_pos: the first generated token's
  GenerateParams params;
  std::string kv_method;
  TokenCallback on_token;
  Sampler sampler;
  RequestStatus status;
  SeqId seq = -1;          // -1: not in the cache (queued, preempted or finished)
  int64_t n_fed = 0;       // tokens of prompt + generated in the cache
  // Sizes of the forward passes that fed them, in order. A preempted request replays the
  // same chunks (its decode tokens one a step): its cache then holds the same bytes as
  // before, so it resumes exactly where it left off (a one-chunk recompute would store
  // slightly different K/V - f32 prefill vs 8-bit decode activations - and may change the text).
  std::vector<int64_t> feeds;
  size_t n_replayed = 0;   // feeds replayed since the last admission
  uint64_t reserved = 0;   // bytes admission counts for it while it runs
  int64_t admitted_at = 0; // admission order: the highest is the newest
  bool cancel = false;
  std::vector<float> logits;  // [n_vocab] after the last fed token, when it is to be sampled
  // Prefix cache (docs/prefix_cache.md). canon: the passes a request alone feeds its prompt
  // in (canonical_feeds); n_canonical: how many of `feeds` lead equal to them. Entries are
  // kept and used only where every pass so far was canonical, so a hit stores no other bit.
  std::vector<int64_t> canon;
  size_t n_canonical = 0;
  std::vector<int64_t> snapshots;  // prompt rows at which an entry is kept (ascending)
  std::vector<RowKey> row_keys;    // the prompt's rows keyed by content, once its method is known
  std::string method_spec;         // canonical, once admitted
  // From a store (spill_store, shared_store) at submission: an entry of the prompt's first
  // shared_n rows (an image under key), loaded and checked at admission.
  std::string shared_image, shared_key;
  int64_t shared_n = 0;
  PrefixStore* shared_from = nullptr;
  int64_t n_local = 0;             // rows the prefix cache held at submission (fetch_shared)
  bool reads_similarity = false;   // its method keys media rows by visual-text similarity (probe_method)
  // The entry it copied at admission when that entry ends at a turn cut of its prompt (the
  // previous turn of its conversation): its prompt-end entry replaces it.
  int64_t replaces = -1;

  // The most rows an entry of its prompt may hold: none of the media rows of a method that
  // keys them by their similarity to all of the prompt's text, which no other prompt
  // could reuse (docs/prefix_cache.md).
  int64_t max_entry_rows() const {
    if (reads_similarity)
      for (const FeedSegment& sg : prompt.segments)
        if (sg.media) return sg.begin;
    return prompt.n_rows();
  }
  // Whether row n lies between two text segments: a cut after an assistant opening
  // (prepare_prompt splits a conversation's text there; media lie between other text).
  bool at_turn_cut(int64_t n) const {
    for (size_t i = 1; i < prompt.segments.size(); ++i)
      if (prompt.segments[i].begin == n) return !prompt.segments[i].media && !prompt.segments[i - 1].media;
    return false;
  }
  // Unencoded media (Request::encode): set until the prompt is encoded; rows below
  // unencoded_end must then come from the prefix cache, or be encoded before they are fed.
  std::function<Result<std::shared_ptr<const PreparedPrompt>>()> encode;
  int64_t unencoded_end = 0;

  // Rows covered by the leading canonical feeds.
  int64_t canonical_rows() const {
    int64_t n = 0;
    for (size_t i = 0; i < n_canonical; ++i) n += canon[i];
    return n;
  }
  // Whether n rows end a canonical pass.
  bool canonical_boundary(int64_t n) const {
    int64_t at = 0;
    for (int64_t c : canon) {
      at += c;
      if (at >= n) return at == n;
    }
    return false;
  }

  explicit Active(const SamplerParams& sp) : sampler(sp) {}
  // The tokens the cache must hold before the next sample: the prompt and every generated
  // token (after a preemption all of them are recomputed).
  int64_t n_to_feed() const { return prompt.n_rows() + static_cast<int64_t>(status.tokens.size()); }
  // Row i after the prompt: generated token i - n_prompt, fed one a step.
  DecodeRow generated_row(int64_t i) const {
    const int64_t k = i - prompt.n_rows();
    return DecodeRow{status.tokens[static_cast<size_t>(k)], prompt.next_pos + k};
  }
};

}  // namespace

struct Scheduler::Impl {
  Engine::Impl* e = nullptr;
  SchedulerParams params;

  mutable std::mutex mutex;
  std::condition_variable changed;  // a request finished, or work arrived
  std::map<RequestId, std::unique_ptr<Active>> requests;
  std::deque<Active*> queue;        // waiting, oldest (or preempted) first
  std::vector<Active*> running;     // admitted, in admission order
  RequestId next_id = 1;
  int64_t admissions = 0;
  uint64_t reserved = 0;
  SchedulerStats counters;
  std::unique_ptr<PrefixCache> cache;  // null: off (cache_budget_bytes 0)
  // Bytes of entries fetched from stores for requests not admitted yet (Active::shared_image):
  // no more lookups while they pass the cache budget, so a crowd of queued requests for one
  // long video does not hold a copy each.
  std::atomic<uint64_t> fetched_bytes{0};
  int64_t chunk = 0;                   // the canonical pass size: min(max_step_prompt_tokens, n_batch)

  std::thread worker;
  bool stop_worker = false;
  std::mutex step_mutex;  // one step() at a time

  Engine* engine = nullptr;
  Result<uint64_t> need(int64_t n_tokens, const std::string& method) const {
    return engine->kv_bytes_for_tokens(n_tokens, method);
  }
  // Frees a request's sequence (if any) and its reservation. Lock held.
  void drop_sequence(Active& a) {
    if (a.seq >= 0) {
      std::lock_guard<std::mutex> lock(e->forward_mutex);
      e->kv->remove_sequence(a.seq);
      a.seq = -1;
    }
    a.n_fed = 0;
    a.logits.clear();
    reserved -= std::min(reserved, a.reserved);
    a.reserved = 0;
  }
  void finish(Active& a, FinishReason reason, Status error, std::vector<TokenEvent>& events) {
    drop_fetched(a);
    double stored = 0;
    uint64_t held = 0;
    if (a.seq >= 0) {
      std::lock_guard<std::mutex> lock(e->forward_mutex);
      stored = e->kv->stored_bytes(a.seq);
      held = e->kv->sequence_bytes(a.seq);
    }
    drop_sequence(a);
    running.erase(std::remove(running.begin(), running.end(), &a), running.end());
    queue.erase(std::remove(queue.begin(), queue.end(), &a), queue.end());
    a.status.state = RequestState::kFinished;
    a.status.reason = reason;
    a.status.error = error;
    TokenEvent ev;
    ev.id = a.id;
    ev.finished = true;
    ev.reason = reason;
    ev.error = error;
    ev.index = static_cast<int64_t>(a.status.tokens.size());
    ev.kv_stored_bytes = stored;
    ev.kv_held_bytes = held;
    ev.n_cached_tokens = a.status.n_cached_tokens;
    events.push_back(ev);
  }
  void preempt(Active& a) {
    drop_sequence(a);
    running.erase(std::remove(running.begin(), running.end(), &a), running.end());
    a.status.state = RequestState::kQueued;
    ++a.status.n_preemptions;
    ++counters.n_preemptions;
    queue.push_front(&a);
  }
  void admit(std::vector<TokenEvent>& events);
  // Prefix cache, forward lock held: the bytes the cache may hold now (its entries
  // included) without touching running requests' reservations or pages.
  uint64_t cache_room() const {
    const uint64_t in_use = e->kv->bytes_in_use();
    const uint64_t running_in_use = in_use - std::min(in_use, cache->bytes());
    const uint64_t budget = e->kv->budget_bytes();
    const uint64_t held = std::max(reserved, running_in_use);
    return budget > held ? budget - held : 0;
  }
  // The longest usable entry for a newly admitted request (its sequence exists, empty);
  // forward lock held.
  PrefixCache::Hit find_prefix(Active& a) {
    if (a.row_keys.empty() && a.prompt.n_rows() > 0)
      a.row_keys = prompt_row_keys(a.prepared.get(), a.prompt, e->kv->sequence_uses_visual_similarity(a.seq));
    // Never the whole prompt: its last row's logits are needed. After a preemption, only as
    // far as its own passes were canonical (it then replays exactly what it fed before).
    int64_t max_n = std::min<int64_t>({a.prompt.n_rows() - 1, static_cast<int64_t>(a.row_keys.size()), a.max_entry_rows()});
    if (!a.feeds.empty()) max_n = std::min(max_n, a.canonical_rows());
    return cache->find(a.method_spec, chunk, a.row_keys, max_n, [&](int64_t n) { return a.canonical_boundary(n); });
  }
  // After a pass: keeps an entry when the request's rows reached one of its snapshot points
  // by canonical passes, and writes it to the shared store. Lock held (the forward lock is
  // taken here).
  void maybe_snapshot(Active& a) {
    if (!cache || !std::binary_search(a.snapshots.begin(), a.snapshots.end(), a.n_fed)) return;
    if (a.n_fed > static_cast<int64_t>(a.row_keys.size()) || a.canonical_rows() < a.n_fed || a.n_fed > a.max_entry_rows())
      return;
    std::lock_guard<std::mutex> lock(e->forward_mutex);
    const std::span<const RowKey> rows = std::span<const RowKey>(a.row_keys).first(static_cast<size_t>(a.n_fed));
    cache->insert(a.seq, a.method_spec, chunk, rows, cache_room(), a.n_fed == a.prompt.n_rows() ? a.replaces : -1,
                  a.cache_owner);
    if (params.shared_store) write_entry(*params.shared_store, a.seq, a.method_spec, chunk, rows);
  }
  // Sequence seq as the entry of these rows for a store that wants it (both locks held: the
  // sequence is read whole here), handed to the store by flush_puts once the locks are
  // released (a --cache-dir file write holds up neither the forward pass nor /metrics).
  void write_entry(PrefixStore& store, SeqId seq, const std::string& method, int64_t n_chunk, std::span<const RowKey> rows) {
    const std::string key = prefix_entry_key(*e, method, n_chunk, rows);
    if (!store.wants(key, e->kv->sequence_bytes(seq))) return;
    Result<std::string> image = prefix_entry_image(*e, seq, method, n_chunk, rows);
    if (image.is_ok()) pending_puts.push_back({&store, key, std::move(image).value()});
  }
  struct PendingPut {
    PrefixStore* store;
    std::string key, value;
  };
  std::vector<PendingPut> pending_puts;  // guarded by mutex
  // No lock held (the stepping thread, at the end of a step).
  void flush_puts() {
    std::vector<PendingPut> puts;
    {
      std::lock_guard<std::mutex> lock(mutex);
      puts.swap(pending_puts);
    }
    for (PendingPut& p : puts) p.store->put(p.key, std::move(p.value));
  }
  // The stores looked in on a miss, nearest first.
  std::vector<PrefixStore*> stores() const {
    std::vector<PrefixStore*> out;
    for (PrefixStore* s : {params.spill_store.get(), params.shared_store.get()})
      if (s) out.push_back(s);
    return out;
  }
  void drop_fetched(Active& a) {
    fetched_bytes -= std::min<uint64_t>(fetched_bytes, a.shared_image.size());
    a.shared_image.clear();
    a.shared_image.shrink_to_fit();
    a.shared_from = nullptr;
  }
  // At submission, no lock held: the longest entry of a's prompt the stores hold beyond
  // what the prefix cache holds, at the pass boundaries entries are made at.
  void fetch_shared(Active& a);
  // At admission (both locks held): the fetched entry checked and loaded into the prefix
  // cache, where find_prefix then finds it. A refused one is logged and recomputed.
  void adopt_shared(Active& a) {
    fetched_bytes -= std::min<uint64_t>(fetched_bytes, a.shared_image.size());
    std::string image = std::move(a.shared_image);
    a.shared_image.clear();
    const std::span<const RowKey> rows = std::span<const RowKey>(a.row_keys).first(static_cast<size_t>(a.shared_n));
    Result<SeqId> seq = load_prefix_entry(*e, image, a.method_spec, chunk, rows);
    if (!seq.is_ok()) {
      VLKV_LOG_WARN("prefix store: refused %s (%zu bytes): %s; recomputing", a.shared_key.c_str(), image.size(),
                    seq.status().message().c_str());
      a.shared_from->refused(a.shared_key);
      return;
    }
    if (!cache->adopt(*seq, a.method_spec, chunk, rows, cache_room() + e->kv->sequence_bytes(*seq), a.cache_owner))
      e->kv->remove_sequence(*seq);
  }
  void deliver(const std::vector<TokenEvent>& events);

  // Unencoded media (Request::encode). probe_method: a's canonical method spec, whether it
  // reads similarities, its row keys (no lock held; false when the method cannot be made).
  bool probe_method(Active& a);
  // Rows of a's prompt the prefix cache holds now (no lock held).
  int64_t local_hit(Active& a);
  // The encoded prompt and its layout (no lock held: the encoder takes the forward lock), and
  // installing them (a's owner: submit, or the stepping thread under the lock).
  struct Encoded {
    std::shared_ptr<const PreparedPrompt> prepared;
    PromptLayout layout;
  };
  Result<Encoded> encode_prompt(const Active& a) const;
  void install(Active& a, Encoded encoded);
};

namespace {
bool has_unencoded_media(const PreparedPrompt& p) {
  for (const PromptChunk& c : p.chunks)
    if (c.kind == PromptChunk::Kind::kMedia && c.n_tokens > 0 && c.embeddings.empty()) return true;
  return false;
}
}  // namespace

bool Scheduler::Impl::probe_method(Active& a) {
  if (a.method_spec.empty()) {
    std::lock_guard<std::mutex> lock(e->forward_mutex);
    Result<SeqId> probe = e->kv->add_sequence(a.kv_method);
    if (!probe.is_ok()) return false;  // admission reports it
    a.method_spec = e->kv->sequence_method(*probe);
    a.reads_similarity = e->kv->sequence_uses_visual_similarity(*probe);
    e->kv->remove_sequence(*probe);
  }
  if (a.row_keys.empty()) a.row_keys = prompt_row_keys(a.prepared.get(), a.prompt, a.reads_similarity);
  return true;
}

int64_t Scheduler::Impl::local_hit(Active& a) {
  if (!probe_method(a)) return 0;
  const int64_t max_n = std::min<int64_t>({a.prompt.n_rows() - 1, static_cast<int64_t>(a.row_keys.size()), a.max_entry_rows()});
  std::lock_guard<std::mutex> lock(mutex);
  std::lock_guard<std::mutex> fl(e->forward_mutex);
  return cache->find(a.method_spec, chunk, a.row_keys, max_n, [&](int64_t n) { return a.canonical_boundary(n); })
      .n_tokens;
}

Result<Scheduler::Impl::Encoded> Scheduler::Impl::encode_prompt(const Active& a) const {
  Result<std::shared_ptr<const PreparedPrompt>> p = a.encode();
  if (!p.is_ok()) return p.status();
  if (!*p || has_unencoded_media(**p)) return Status(StatusCode::kInternal, "the encode callback left media unencoded");
  VLKV_ASSIGN_OR_RETURN(PromptLayout l, lay_out_prompt(*e, **p, 0, /*with_similarity=*/true));
  // The same rows as the layout the request was admitted, keyed and cut by.
  bool same = l.tokens == a.prompt.tokens && l.positions == a.prompt.positions && l.kinds == a.prompt.kinds &&
              l.segments.size() == a.prompt.segments.size();
  for (size_t i = 0; same && i < l.segments.size(); ++i)
    same = l.segments[i].begin == a.prompt.segments[i].begin && l.segments[i].end == a.prompt.segments[i].end &&
           l.segments[i].mrope == a.prompt.segments[i].mrope;
  if (!same) return Status(StatusCode::kInternal, "the encoded prompt does not match its unencoded layout");
  return Encoded{std::move(*p), std::move(l)};
}

void Scheduler::Impl::install(Active& a, Encoded encoded) {
  a.prepared = std::move(encoded.prepared);
  a.prompt = std::move(encoded.layout);
  a.encode = nullptr;
  // Similarity-keyed rows change with the embeddings: keyed again when next needed.
  if (a.reads_similarity) a.row_keys.clear();
}

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Scheduler::~Scheduler() {
  stop();
  std::vector<TokenEvent> events;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    for (auto& [id, a] : impl_->requests)
      if (a->status.state != RequestState::kFinished) impl_->finish(*a, FinishReason::kCancelled, Status::ok(), events);
  }
  impl_->deliver(events);
  std::lock_guard<std::mutex> lock(impl_->e->forward_mutex);
  impl_->cache.reset();  // its entries' sequences go back to the pool
}

Result<std::unique_ptr<Scheduler>> Scheduler::create(Engine& engine, const SchedulerParams& params) {
  if (params.max_sequences <= 0 || params.max_sequences > 65536)
    return invalid_argument("max_sequences must be in [1, 65536]");
  if (params.max_step_prompt_tokens <= 0) return invalid_argument("max_step_prompt_tokens must be positive");
  if ((params.shared_store || params.spill_store) && params.cache_budget_bytes == 0)
    return invalid_argument("a prefix store (shared or spill) needs the prefix cache (cache_budget_bytes > 0)");
  if (!(params.cache_owner_share > 0 && params.cache_owner_share <= 1))
    return invalid_argument("cache_owner_share must be in (0, 1]");
  auto impl = std::make_unique<Impl>();
  impl->engine = &engine;
  impl->e = &engine.impl();
  impl->params = params;
  impl->chunk = std::min(params.max_step_prompt_tokens, impl->e->params.n_batch);
  if (params.cache_budget_bytes > 0) impl->cache = std::make_unique<PrefixCache>(*impl->e->kv, params.cache_budget_bytes);
  if (impl->cache && params.cache_owner_share < 1)
    impl->cache->set_owner_cap(static_cast<uint64_t>(static_cast<double>(params.cache_budget_bytes) * params.cache_owner_share));
  if (impl->cache && params.spill_store) {
    // Evicted entries go to the spill store (forward lock held: the sequence is still whole).
    Impl* s = impl.get();
    impl->cache->set_evict_hook([s](SeqId seq, const std::string& method, int64_t chunk, std::span<const RowKey> rows) {
      s->write_entry(*s->params.spill_store, seq, method, chunk, rows);
    });
  }
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(impl)));
}

Result<uint64_t> Scheduler::kv_bytes_for(int64_t n_tokens, const std::string& kv_method) const {
  if (n_tokens < 0) return invalid_argument("negative token count");
  return impl_->need(n_tokens, kv_method);
}

Result<RequestId> Scheduler::submit(const Request& request, TokenCallback on_token) {
  Impl& s = *impl_;
  const GenerateParams& gp = request.generate;
  if (gp.max_tokens <= 0) return invalid_argument("max_tokens must be positive");
  VLKV_RETURN_IF_ERROR(validate_sampler_params(gp.sampling));
  auto a = std::make_unique<Active>(gp.sampling);
  a->cache_owner = request.cache_owner;
  if (request.prepared) {
    const PreparedPrompt& p = *request.prepared;
    if (p.chunks.empty() || p.n_tokens() == 0) return invalid_argument("the prompt is empty");
    for (const std::shared_ptr<VideoStream>& st : p.streams)  // read once, frame by frame: a Session's feed only
      if (st) return invalid_argument("a streamed video (MediaItem::stream) is fed by a Session, not the scheduler");
    a->prepared = request.prepared;
    const bool unencoded = has_unencoded_media(p);
    if (unencoded && !request.encode)
      return invalid_argument("the prompt has media without embeddings and the request no encode callback");
    if (unencoded) a->encode = request.encode;
    // Similarities whenever there are visual tokens (a dot product each): the request's own
    // KV method may read them (uses_visual_similarity) even when the engine's does not; others ignore them.
    // Unencoded media have none yet (a method that reads them has its media encoded below).
    VLKV_ASSIGN_OR_RETURN(a->prompt, lay_out_prompt(*s.e, p, 0, /*with_similarity=*/!unencoded, unencoded));
    for (const FeedSegment& sg : a->prompt.segments)
      if (sg.media && !sg.embeddings) a->unencoded_end = sg.end;
    for (const FeedSegment& sg : a->prompt.segments)
      if (sg.non_causal && sg.end - sg.begin > s.params.max_step_prompt_tokens)
        return invalid_argument("an image of " + std::to_string(sg.end - sg.begin) +
                                " tokens is decoded non-causally in one step, more than max_step_prompt_tokens (" +
                                std::to_string(s.params.max_step_prompt_tokens) + ")");
    for (const PromptChunk& c : p.chunks)
      for (int32_t t : c.tokens) a->sampler.accept(t);
  } else {
    if (request.prompt_tokens.empty() && request.prompt_text.empty()) return invalid_argument("the prompt is empty");
    std::vector<int32_t> tokens = request.prompt_tokens;
    if (tokens.empty())
      tokens = s.e->tokenizer->encode(request.prompt_text, /*add_special=*/true, /*parse_special=*/true);
    if (tokens.empty()) return invalid_argument("the prompt is empty");
    VLKV_RETURN_IF_ERROR(check_token_ids(tokens, s.e->hparams.n_vocab));
    a->prompt = lay_out_tokens(tokens, 0);
    for (int32_t t : tokens) a->sampler.accept(t);
  }
  const int64_t n_total = a->prompt.n_rows() + gp.max_tokens;
  if (n_total > s.e->params.n_ctx)
    return invalid_argument("prompt (" + std::to_string(a->prompt.n_rows()) + " tokens) + max_tokens (" +
                            std::to_string(gp.max_tokens) + ") exceed the context size of " +
                            std::to_string(s.e->params.n_ctx));
  VLKV_ASSIGN_OR_RETURN(uint64_t bytes, s.need(n_total, request.kv_method));
  const uint64_t budget = s.e->kv->budget_bytes();
  if (bytes > budget)
    return out_of_memory("the request needs up to " + format_bytes(bytes) + " of KV cache (" + std::to_string(n_total) +
                         " tokens, method " + (request.kv_method.empty() ? s.e->kv->method_name() : request.kv_method) +
                         ") but the KV budget is " + format_bytes(budget) + ": it can never run");
  a->params = gp;
  a->kv_method = request.kv_method;
  a->on_token = std::move(on_token);
  a->status.n_prompt_tokens = a->prompt.n_rows();
  if (s.cache) {
    // Entries at the end of the prompt's last media item (every later question about it,
    // every later turn of the conversation starts with it) and at the last canonical pass
    // boundary before the prompt's end (a long text prefix, earlier turns' text).
    a->canon = canonical_feeds(a->prompt, s.chunk);
    int64_t media_end = 0;
    for (const FeedSegment& sg : a->prompt.segments)
      if (sg.media) media_end = sg.end;
    if (media_end > 0) a->snapshots.push_back(media_end);
    int64_t at = 0, last = 0;
    for (int64_t c : a->canon) {
      at += c;
      if (at < a->prompt.n_rows() && at > media_end) last = at;
    }
    if (last > 0) a->snapshots.push_back(last);
    // And at the prompt's end when it ends with the assistant opening: the next turn of the
    // conversation is cut there (prepare_prompt), so it continues from this entry.
    if (a->prepared && a->prepared->ends_at_turn && a->prompt.n_rows() > std::max(media_end, last))
      a->snapshots.push_back(a->prompt.n_rows());
  }
  // Unencoded media: encoded now unless the prefix cache or a store covers them. A method
  // that keys media rows by their similarity to the text needs the embeddings to key them.
  if (a->encode && (!s.cache || !s.probe_method(*a) || a->reads_similarity)) {
    VLKV_ASSIGN_OR_RETURN(Impl::Encoded enc, s.encode_prompt(*a));
    s.install(*a, std::move(enc));
  }
  if (s.cache && !s.stores().empty()) s.fetch_shared(*a);
  if (a->encode) {
    const int64_t covered = std::max(a->shared_n, s.stores().empty() ? s.local_hit(*a) : a->n_local);
    if (covered < a->unencoded_end) {
      VLKV_ASSIGN_OR_RETURN(Impl::Encoded enc, s.encode_prompt(*a));
      s.install(*a, std::move(enc));
    }
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  a->id = s.next_id++;
  const RequestId id = a->id;
  s.queue.push_back(a.get());
  s.requests.emplace(id, std::move(a));
  s.changed.notify_all();
  return id;
}

Status Scheduler::cancel(RequestId id) {
  std::vector<TokenEvent> events;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    auto it = impl_->requests.find(id);
    if (it == impl_->requests.end()) return not_found("no request " + std::to_string(id));
    Active& a = *it->second;
    a.cancel = true;
    // A waiting request (queued or preempted) holds no sequence: it ends now rather than
    // when it reaches the queue's front. A running one ends at the next step.
    if (a.status.state == RequestState::kQueued && a.seq < 0) impl_->finish(a, FinishReason::kCancelled, Status::ok(), events);
    impl_->changed.notify_all();
  }
  impl_->deliver(events);
  return Status::ok();
}

Result<RequestStatus> Scheduler::poll(RequestId id) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto it = impl_->requests.find(id);
  if (it == impl_->requests.end()) return not_found("no request " + std::to_string(id));
  return it->second->status;
}

Result<RequestStatus> Scheduler::wait(RequestId id) {
  std::unique_lock<std::mutex> lock(impl_->mutex);
  for (;;) {
    auto it = impl_->requests.find(id);
    if (it == impl_->requests.end()) return not_found("no request " + std::to_string(id));
    if (it->second->status.state == RequestState::kFinished) return it->second->status;
    impl_->changed.wait(lock);
  }
}

Status Scheduler::release(RequestId id) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto it = impl_->requests.find(id);
  if (it == impl_->requests.end()) return not_found("no request " + std::to_string(id));
  if (it->second->status.state != RequestState::kFinished)
    return invalid_argument("request " + std::to_string(id) + " has not finished (cancel it first)");
  impl_->requests.erase(it);
  return Status::ok();
}

bool Scheduler::idle() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->queue.empty() && impl_->running.empty();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  SchedulerStats st = impl_->counters;
  st.n_queued = static_cast<int64_t>(impl_->queue.size());
  st.n_running = static_cast<int64_t>(impl_->running.size());
  std::lock_guard<std::mutex> fl(impl_->e->forward_mutex);
  st.kv_bytes_in_use = impl_->e->kv->bytes_in_use();
  st.kv_budget_bytes = impl_->e->kv->budget_bytes();
  st.kv_bytes_reserved = impl_->reserved;
  for (const auto* a : impl_->running)
    if (a->seq >= 0) st.kv_bytes_by_method[a->kv_method] += impl_->e->kv->sequence_bytes(a->seq);
  if (impl_->cache) {
    st.prefix_cache_bytes = impl_->cache->bytes();
    st.prefix_cache_budget_bytes = impl_->cache->max_bytes();
    st.prefix_cache = impl_->cache->stats();
  }
  if (impl_->e->media_cache) {
    const MediaCache::Stats m = impl_->e->media_cache->stats();
    st.media_cache_hits = m.hits;
    st.media_cache_misses = m.misses;
    st.media_cache_entries = m.entries;
    st.media_cache_bytes = m.bytes;
  }
  st.media_encodes = impl_->e->n_media_encodes.load();
  for (PrefixStore* store : impl_->stores()) st.stores.push_back(store->stats());
  return st;
}

void Scheduler::Impl::fetch_shared(Active& a) {
  constexpr size_t kMaxLookups = 16;  // the longest candidates: a loopback miss costs ~0.1 ms
  if (!probe_method(a)) return;
  const int64_t max_n = std::min<int64_t>({a.prompt.n_rows() - 1, static_cast<int64_t>(a.row_keys.size()), a.max_entry_rows()});
  const int64_t local = a.n_local = local_hit(a);
  std::vector<int64_t> candidates;
  int64_t at = 0;
  for (int64_t c : a.canon) {
    at += c;
    if (at > local && at <= max_n) candidates.push_back(at);
  }
  std::reverse(candidates.begin(), candidates.end());
  if (fetched_bytes >= params.cache_budget_bytes) candidates.clear();
  if (candidates.size() > kMaxLookups) candidates.resize(kMaxLookups);
  for (int64_t n : candidates) {
    const std::string key = prefix_entry_key(*e, a.method_spec, chunk, std::span<const RowKey>(a.row_keys).first(static_cast<size_t>(n)));
    for (PrefixStore* store : stores())
      if (std::optional<std::string> image = store->get(key)) {
        fetched_bytes += image->size();
        a.shared_image = std::move(*image);
        a.shared_key = key;
        a.shared_n = n;
        a.shared_from = store;
        return;
      }
  }
}

// Admits queued requests, oldest first, while their reservations fit the budget (a
// request that does not fit blocks the ones behind it: first come, first served).
void Scheduler::Impl::admit(std::vector<TokenEvent>& events) {
  const uint64_t budget = e->kv->budget_bytes();
  while (!queue.empty() && static_cast<int>(running.size()) < params.max_sequences) {
    Active& a = *queue.front();
    if (a.cancel) {
      finish(a, FinishReason::kCancelled, Status::ok(), events);
      continue;
    }
    const int64_t n_left = a.params.max_tokens - static_cast<int64_t>(a.status.tokens.size());
    Result<uint64_t> bytes = need(a.n_to_feed() + (params.reserve_max_tokens ? n_left : 1), a.kv_method);
    if (!bytes.is_ok()) {
      finish(a, FinishReason::kError, bytes.status(), events);
      continue;
    }
    // Running requests may hold more than they reserved (admitted by their prompt alone).
    if (!cache) {
      const uint64_t in_use = [&] {
        std::lock_guard<std::mutex> lock(e->forward_mutex);
        return e->kv->bytes_in_use();
      }();
      if (std::max(reserved, in_use) + *bytes > budget && !running.empty()) break;
    }
    Result<SeqId> seq = [&]() -> Result<SeqId> {
      std::lock_guard<std::mutex> lock(e->forward_mutex);
      return e->kv->add_sequence(a.kv_method);
    }();
    if (!seq.is_ok()) {
      finish(a, FinishReason::kError, seq.status(), events);
      continue;
    }
    a.seq = *seq;
    int64_t n_cached = 0;
    if (cache) {
      std::lock_guard<std::mutex> lock(e->forward_mutex);
      a.method_spec = e->kv->sequence_method(a.seq);
      a.reads_similarity = e->kv->sequence_uses_visual_similarity(a.seq);
      if (a.shared_from) {
        if (a.row_keys.empty())
          a.row_keys = prompt_row_keys(a.prepared.get(), a.prompt, e->kv->sequence_uses_visual_similarity(a.seq));
        if (static_cast<int64_t>(a.row_keys.size()) >= a.shared_n) adopt_shared(a);
        drop_fetched(a);
      }
      PrefixCache::Hit hit = find_prefix(a);
      // Idle entries give way to the reservation, least recently used first (the one this
      // request is about to copy last).
      auto fits = [&] { return cache_room() >= cache->bytes() + *bytes; };
      while (!fits() && cache->evict_lru(hit.id)) {
      }
      if (!fits() && hit.id >= 0) {
        cache->evict_lru();
        hit = {};
      }
      if (!fits() && !running.empty()) {
        e->kv->remove_sequence(a.seq);
        a.seq = -1;
        break;
      }
      if (hit.id >= 0 && e->kv->copy_sequence(hit.seq, a.seq).is_ok()) n_cached = hit.n_tokens;
      a.replaces = n_cached > 0 && a.at_turn_cut(n_cached) ? hit.id : -1;
      cache->count_lookup(a.method_spec, n_cached);
      if (a.max_entry_rows() < a.prompt.n_rows() && a.status.n_preemptions == 0) cache->count_media_not_kept(a.method_spec);
    }
    queue.pop_front();
    a.n_fed = 0;
    a.n_replayed = 0;
    if (n_cached > 0) {
      // The entry holds what the canonical passes over these rows store: the request goes
      // on from there, and a replay after a preemption replays those passes.
      a.n_fed = n_cached;
      size_t k = 0;
      for (int64_t at = 0; at < n_cached; at += a.canon[k++]) {
      }
      if (a.feeds.empty()) a.feeds.assign(a.canon.begin(), a.canon.begin() + static_cast<std::ptrdiff_t>(k));
      a.n_replayed = k;
      a.n_canonical = std::max(a.n_canonical, k);
    }
    if (a.status.n_preemptions == 0) a.status.n_cached_tokens = n_cached;
    a.reserved = *bytes;
    reserved += *bytes;
    a.admitted_at = ++admissions;
    a.status.state = RequestState::kRunning;
    running.push_back(&a);
  }
}

void Scheduler::Impl::deliver(const std::vector<TokenEvent>& events) {
  std::vector<RequestId> stopped;
  for (const TokenEvent& ev : events) {
    TokenCallback cb;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = requests.find(ev.id);
      if (it == requests.end() || !it->second->on_token) continue;
      cb = it->second->on_token;
    }
    if (!cb(ev) && !ev.finished) stopped.push_back(ev.id);
  }
  if (stopped.empty()) return;
  std::vector<TokenEvent> ends;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (RequestId id : stopped) {
      auto it = requests.find(id);
      if (it != requests.end() && it->second->status.state != RequestState::kFinished)
        finish(*it->second, FinishReason::kStopped, Status::ok(), ends);
    }
    changed.notify_all();
  }
  deliver(ends);
}

Result<StepResult> Scheduler::step() {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> step_lock(s.step_mutex);
  StepResult result;
  std::vector<TokenEvent> events;
  std::vector<BatchSequence> batch;
  std::vector<Active*> who;
  std::vector<DecodeRow> decode_rows;  // [batch] the step's generated tokens (prompt rows point into their layout)
  std::vector<int64_t> n_feed;  // [batch] tokens fed
  std::vector<Active*> to_encode;  // its hit did not cover its unencoded media: encoded first
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (Active* a : std::vector<Active*>(s.running))
      if (a->cancel) s.finish(*a, FinishReason::kCancelled, Status::ok(), events);
    s.admit(events);
    int64_t prompt_budget = s.params.max_step_prompt_tokens;
    const int64_t n_batch = s.e->params.n_batch;
    for (Active* a : s.running) {
      int64_t remaining = a->n_to_feed() - a->n_fed;
      if (remaining <= 0) continue;  // cannot happen: a sampled token is always fed next
      if (a->encode && a->n_fed < a->unencoded_end) {
        to_encode.push_back(a);
        continue;
      }
      // A prompt chunk stops at its segment's end (text ids and media embeddings are
      // separate inputs), as Session::eval_prompt splits it.
      const FeedSegment* seg = a->prompt.segment_at(a->n_fed);
      if (seg) remaining = seg->end - a->n_fed;
      const bool replay = a->n_replayed < a->feeds.size();
      const bool whole = seg && seg->non_causal;  // a non-causal image waits for a step with room for all of it
      const int64_t n = replay ? a->feeds[a->n_replayed]
                        : remaining == 1 || whole ? remaining : std::min({remaining, prompt_budget, n_batch});
      if (n <= 0 || (n > 1 && n > prompt_budget)) continue;  // prompt budget spent: it waits for the next step
      if (n > 1) prompt_budget -= n;
      n_feed.push_back(n);
      who.push_back(a);
    }
    decode_rows.resize(who.size());
    for (size_t i = 0; i < who.size(); ++i) {
      const Active& a = *who[i];
      BatchSequence b;
      b.seq = a.seq;
      if (a.n_fed < a.prompt.n_rows()) {
        b.in = a.prompt.rows(a.n_fed, n_feed[i]);
      } else {  // a generated token: fed one a step (a replay repeats those single feeds)
        VLKV_CHECK(n_feed[i] == 1);
        decode_rows[i] = a.generated_row(a.n_fed);
        b.in = decode_rows[i].input();
      }
      const bool last = a.n_fed + b.in.n_tokens == a.n_to_feed();
      b.mode = last ? LogitsMode::kLast : LogitsMode::kNone;
      b.logits = &who[i]->logits;
      batch.push_back(b);
    }
  }
  for (Active* a : to_encode) {
    // The fallback of Request::encode, on the stepping thread (the encoder takes the forward
    // lock, as it would on the caller's); fed from the next step on.
    Result<Impl::Encoded> enc = s.encode_prompt(*a);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (a->status.state != RequestState::kRunning) continue;
    if (enc.is_ok()) s.install(*a, std::move(enc).value());
    else s.finish(*a, FinishReason::kError, enc.status(), events);
  }
  if (!batch.empty()) {
    Status st;
    {
      std::lock_guard<std::mutex> lock(s.e->forward_mutex);
      st = s.e->decoder->forward_batch(batch, *s.e->kv, *s.e->pool);
    }
    std::lock_guard<std::mutex> lock(s.mutex);
    ++s.counters.n_steps;
    if (!st.is_ok()) {
      for (Active* a : who) s.finish(*a, FinishReason::kError, st, events);
    } else {
      Status no_room = Status::ok();  // an out-of-memory status of this step
      for (size_t i = 0; i < who.size(); ++i) {
        Active& a = *who[i];
        const BatchSequence& b = batch[i];
        if (b.status.code() == StatusCode::kOutOfMemory) {
          no_room = b.status;
          continue;
        }
        if (!b.status.is_ok()) {
          s.finish(a, FinishReason::kError, b.status, events);
          continue;
        }
        ++result.n_sequences;
        if (b.in.n_tokens == 1) ++result.n_decode_tokens;
        else result.n_prompt_tokens += b.in.n_tokens;
        a.n_fed += b.in.n_tokens;
        if (a.n_replayed == a.feeds.size()) a.feeds.push_back(b.in.n_tokens);
        ++a.n_replayed;
        if (a.n_canonical + 1 == a.n_replayed && a.n_canonical < a.canon.size() &&
            a.feeds[a.n_canonical] == a.canon[a.n_canonical])
          ++a.n_canonical;
        s.maybe_snapshot(a);
        if (b.mode == LogitsMode::kNone) continue;
        // Sample the next token.
        const int32_t next = sample_step(a.sampler, a.params.logits_processor.get(), a.logits.data(),
                                         static_cast<int>(s.e->hparams.n_vocab));
        if (!a.params.ignore_eos && s.e->tokenizer->is_end_of_generation(next)) {
          s.finish(a, FinishReason::kEos, Status::ok(), events);
          ++result.n_finished;
          continue;
        }
        TokenEvent ev;
        ev.id = a.id;
        ev.token = next;
        ev.piece = s.e->tokenizer->token_to_piece(next);
        ev.index = static_cast<int64_t>(a.status.tokens.size());
        a.status.tokens.push_back(next);
        a.status.text += ev.piece;
        ++s.counters.n_generated;
        events.push_back(ev);
        if (static_cast<int64_t>(a.status.tokens.size()) >= a.params.max_tokens) {
          s.finish(a, FinishReason::kLength, Status::ok(), events);
          ++result.n_finished;
        }
      }
      // The pool ran dry: preempt the newest sequence (it recomputes later); the sequences
      // that failed retry next step. A sequence that fails alone can never fit.
      // Idle prefix-cache entries go first (least recently used first): the sequences that
      // failed retry next step with their pages free.
      uint64_t wanted = 0;
      if (!no_room.is_ok() && s.cache && s.cache->n_entries() > 0) {
        std::lock_guard<std::mutex> lock(s.e->forward_mutex);
        for (size_t i = 0; i < who.size(); ++i) {
          if (batch[i].status.code() != StatusCode::kOutOfMemory) continue;
          Result<uint64_t> need = s.e->kv->max_bytes_for_tokens(who[i]->n_fed + batch[i].in.n_tokens, who[i]->kv_method);
          const uint64_t held = s.e->kv->sequence_bytes(who[i]->seq);
          wanted += need.is_ok() && *need > held ? *need - held : s.e->kv->page_bytes();
        }
        if (s.cache->evict_bytes(wanted) > 0) no_room = Status::ok();
      }
      if (!no_room.is_ok()) {
        Active* newest = nullptr;
        for (Active* a : s.running)
          if (!newest || a->admitted_at > newest->admitted_at) newest = a;
        if (newest && s.running.size() == 1) {
          s.finish(*newest, FinishReason::kError, no_room.with_context("the request does not fit the KV budget alone"),
                   events);
        } else if (newest) {
          s.preempt(*newest);
          ++result.n_preempted;
        }
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!events.empty()) s.changed.notify_all();
  }
  s.deliver(events);
  s.flush_puts();
  return result;
}

Status Scheduler::start() {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.worker.joinable()) return invalid_argument("the scheduler's thread is already running");
  s.stop_worker = false;
  s.worker = std::thread([this] {
    Impl& s = *impl_;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(s.mutex);
        s.changed.wait(lock, [&] { return s.stop_worker || !s.queue.empty() || !s.running.empty(); });
        if (s.stop_worker) return;
      }
      Result<StepResult> r = step();
      if (!r.is_ok()) return;  // broken invariant: requests have their errors
    }
  });
  return Status::ok();
}

void Scheduler::stop() {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stop_worker = true;
    s.changed.notify_all();
  }
  if (s.worker.joinable()) s.worker.join();
}

}  // namespace vlkv
