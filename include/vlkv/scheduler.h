// Continuous batching over one Engine: requests wait in a queue, are admitted by the KV
// bytes they will need, and then advance together, one batched forward pass per step
// (prompt chunks of new requests and one decode token of each running one). When the KV
// pool runs dry mid-generation the newest sequence is preempted (its pages freed, it is
// requeued and its tokens recomputed later, vLLM's recompute policy; the recompute replays
// the forward passes that fed it - same prompt chunks, decode tokens one a step - so it
// resumes with the same cache bytes and continues exactly as if never preempted).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vlkv/engine.h"
#include "vlkv/prefix_store.h"
#include "vlkv/status.h"

namespace vlkv {

using RequestId = int64_t;

struct Request {
  // The prompt as token ids (BOS included when wanted), or, when empty, prompt_text:
  // tokenized with BOS as the tokenizer's metadata says and special tokens parsed.
  std::vector<int32_t> prompt_tokens;
  std::string prompt_text;
  // When set, the prompt instead (prompt_tokens and prompt_text ignored): text and media
  // chunks from Engine::prepare_prompt (BOS as prepared), fed as Session::eval_prompt
  // feeds them - token kinds, visual embeddings, M-RoPE positions for qwen2vl - and kept
  // by the scheduler for as long as the request lives (a preempted one replays it).
  std::shared_ptr<const PreparedPrompt> prepared;
  // When prepared's media chunks have no embeddings (Engine::prepare_prompt_unencoded): makes
  // the encoded prompt (Engine::prepare_prompt of the same Prompt). Called only when the
  // prefix cache and the stores do not cover every unencoded media row: in submit() when they
  // do not at submission, else on the stepping thread once the hit turns out shorter (an
  // entry evicted or refused meanwhile, a preempted request re-admitted). A request with
  // unencoded media and no encode is refused.
  std::function<Result<std::shared_ptr<const PreparedPrompt>>()> encode;
  GenerateParams generate;  // max_tokens, ignore_eos, sampling (a fixed seed makes a run repeatable)
  // "" : the engine's KV method; else this request's own method spec ("f16", "kivi:bits=2").
  std::string kv_method;
  // Whose prefix-cache entries this request makes (vlkv serve: a hash of its tenant), for
  // SchedulerParams::cache_owner_share. Keys are partitioned by Prompt::cache_salt, not by this.
  uint64_t cache_owner = 0;
};

enum class RequestState { kQueued, kRunning, kFinished };
enum class FinishReason { kNone, kLength, kEos, kStopped, kCancelled, kError };

// One event of a request, handed to its callback on the stepping thread: a generated
// token (token >= 0), or the request's end (finished: token is -1, reason says why).
struct TokenEvent {
  RequestId id = 0;
  int32_t token = -1;
  std::string piece;        // the token's bytes ("" at the end event)
  int64_t index = 0;        // 0-based among the request's generated tokens
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
  Status error;             // reason kError: why
  double kv_stored_bytes = 0;  // the end event: exact codec bytes its cache held then (0 if none)
  uint64_t kv_held_bytes = 0;  // the end event: bytes of the KV pages its cache held then (0 if none)
  int64_t n_cached_tokens = 0; // the end event: prompt tokens taken from the prefix cache
};
// Return false to stop the request (it ends with kStopped). Called without the
// scheduler's lock held: it may call submit/cancel/poll, but not step().
using TokenCallback = std::function<bool(const TokenEvent&)>;

struct RequestStatus {
  RequestState state = RequestState::kQueued;
  FinishReason reason = FinishReason::kNone;
  Status error;                     // reason kError: why
  std::vector<int32_t> tokens;      // generated so far
  std::string text;                 // their pieces, concatenated
  int64_t n_prompt_tokens = 0;
  int n_preemptions = 0;            // times it was preempted and recomputed
  // Prompt tokens its first admission took from the prefix cache (not evaluated again):
  // OpenAI's usage.prompt_tokens_details.cached_tokens.
  int64_t n_cached_tokens = 0;
};

struct SchedulerParams {
  int max_sequences = 256;              // sequences running at once
  int64_t max_step_prompt_tokens = 512; // prompt tokens per step (chunked prefill), over all sequences
  // true: a request is admitted when its worst case (prompt + max_tokens) fits next to the
  // others' reservations, so the pool never runs dry unless a data-dependent method stores
  // more than its bound. false: admitted by its prompt alone (vLLM's policy): more requests
  // run at once, and the newest is preempted (recomputed later) when the pool runs dry.
  bool reserve_max_tokens = true;
  // The prefix cache (docs/prefix_cache.md): KV of evaluated prompt prefixes kept, by
  // content and KV method, for later requests that start with the same tokens and media
  // (a conversation's next turn, another question about the same image), at most this many
  // bytes of pages. They count against the KV budget and are evicted, least recently used
  // first, before any running request waits or is preempted. 0: no prefix cache.
  uint64_t cache_budget_bytes = 0;
  // The most of cache_budget_bytes one Request::cache_owner's entries may hold (1: no cap). An
  // owner's new entry evicts its own least recently used entries first; at 1/owners or less no
  // owner's entries push out another's (requests needing pages still evict any entry).
  double cache_owner_share = 1.0;
  // A store shared with other replicas (include/vlkv/prefix_store.h; vlkv serve --redis): a
  // request the prefix cache misses looks there (before it is queued) for the longest entry
  // of its prompt, and every entry this scheduler keeps is written there too. Null: none.
  // Needs cache_budget_bytes > 0 (what is read comes into the prefix cache).
  std::shared_ptr<PrefixStore> shared_store;
  // A store idle entries are spilled to when evicted from memory (vlkv serve --cache-dir),
  // looked in like shared_store. Null: evicted entries are gone.
  std::shared_ptr<PrefixStore> spill_store;
};

// The prefix cache's counters for one KV method (canonical spec).
struct PrefixCacheMethodStats {
  std::string method;
  int64_t hits = 0;            // admissions that took a prefix from the cache
  int64_t misses = 0;          // admissions that found none
  int64_t cached_tokens = 0;   // prompt tokens taken from it, summed over hits
  int64_t inserted = 0, evicted = 0;
  int64_t replaced = 0;        // entries dropped for the longer entry of the same conversation's next turn
  int64_t media_not_kept = 0;  // admissions with media rows this method keeps no entries for (VidKV)
  int64_t entries = 0;         // held now
  int64_t tokens = 0;          // their tokens
  uint64_t bytes = 0;          // their pages
};

// The counters of the caches in front of the decoder: the prefix cache (docs/prefix_cache.md),
// its stores, and the engine's vision encoder output cache (EngineParams::media_cache_bytes).
struct CacheStats {
  uint64_t prefix_cache_bytes = 0, prefix_cache_budget_bytes = 0;  // pages its entries hold (in kv_bytes_in_use)
  std::vector<PrefixCacheMethodStats> prefix_cache;                // per method it has seen
  int64_t media_cache_hits = 0, media_cache_misses = 0, media_cache_entries = 0;
  uint64_t media_cache_bytes = 0;
  int64_t media_encodes = 0;  // media items the vision encoder ran on (Engine::media_encodes)
  std::vector<PrefixStoreStats> stores;  // SchedulerParams::spill_store's and shared_store's counters
};

struct SchedulerStats : CacheStats {
  int64_t n_queued = 0, n_running = 0;
  uint64_t kv_bytes_in_use = 0, kv_budget_bytes = 0;
  uint64_t kv_bytes_reserved = 0;  // admitted requests' worst-case need (admission's ledger)
  // Pages the running requests hold, by the KV method they asked for ("": the engine's).
  std::map<std::string, uint64_t> kv_bytes_by_method;
  int64_t n_steps = 0, n_generated = 0, n_preemptions = 0;
};

// What one step did.
struct StepResult {
  int n_sequences = 0;     // sequences the forward pass advanced
  int n_decode_tokens = 0; // of which one decode token each
  int64_t n_prompt_tokens = 0;
  int n_finished = 0;
  int n_preempted = 0;
};

// Thread safety: submit, cancel, poll, release and stats may be called from any thread;
// step() from one thread at a time (or let start() run it on a background thread).
class Scheduler {
 public:
  // engine must outlive the scheduler; while it runs, use the engine's Sessions only
  // through it (both share the engine's KV pool).
  static Result<std::unique_ptr<Scheduler>> create(Engine& engine, const SchedulerParams& params = {});
  ~Scheduler();  // stops the background thread, ends every request (kCancelled), frees its pages

  // Queues a request. InvalidArgument for a bad one (empty prompt, token outside the
  // vocabulary, bad sampling params, unknown KV method, prompt + max_tokens over the
  // context); OutOfMemory when it could never fit the KV budget, even alone.
  Result<RequestId> submit(const Request& request, TokenCallback on_token = {});
  // Ends a queued or running request (kCancelled; its pages are freed at the next step).
  // NotFound for an unknown or released id.
  Status cancel(RequestId id);
  // The request's state and output so far. NotFound for an unknown or released id.
  Result<RequestStatus> poll(RequestId id) const;
  // Blocks until the request finishes (some thread must be stepping), then returns poll().
  Result<RequestStatus> wait(RequestId id);
  // Forgets a finished request (poll then says NotFound); InvalidArgument while it runs.
  Status release(RequestId id);

  // Admits what fits, runs one batched forward pass, samples, delivers events.
  // Ok with all zeros when there is nothing to do. An error is the engine's (a broken
  // invariant); a request's own failure ends that request with kError instead.
  Result<StepResult> step();
  // True when nothing is queued or running.
  bool idle() const;

  // A background thread calling step() while there is work (sleeping otherwise).
  Status start();
  void stop();  // waits for the step in progress; requests stay as they are

  SchedulerStats stats() const;
  // KV bytes a request of this many tokens (prompt + max_tokens) reserves with this
  // method ("" : the engine's), page tails and windows included: what admission counts.
  Result<uint64_t> kv_bytes_for(int64_t n_tokens, const std::string& kv_method = "") const;

  struct Impl;

 private:
  explicit Scheduler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vlkv
