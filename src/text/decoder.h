// The Llama-family text decoder (llama, qwen2, qwen2vl, gemma3): embeddings → N × (RMSNorm,
// attention through the KV cache, RMSNorm, SwiGLU/GeGLU FFN; gemma3 adds q/k norms and
// post-norms) → RMSNorm → logits.
// Reads top to bottom like the model's equations; all attention state lives in
// the KV cache (what a step calls: KvStepCache), so one decoder serves any number of sequences.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "kv/kv_step_cache.h"
#include "text/hparams.h"
#include "text/text_weights.h"
#include "text/tokenizer.h"

namespace vlkv {

// One layer's post-RoPE queries and keys of a chunk as the layer computed them, for
// DecoderInput::observer.
struct LayerQk {
  int layer = 0;
  int64_t n_tokens = 0;
  const float* q = nullptr;          // [n_tokens, n_heads, head_dim]
  const float* k = nullptr;          // [n_tokens, n_kv_heads, head_dim]
  const TokenKind* kinds = nullptr;  // [n_tokens]
};

// One chunk of consecutive new tokens of one sequence. Exactly one of tokens /
// embeddings is set: text chunks pass ids, media chunks pass projected embeddings.
struct DecoderInput {
  int64_t n_tokens = 0;
  const TokenId* tokens = nullptr;     // [n_tokens]
  // [n_tokens, hp.n_embd_inp()]: the input embedding, then (deepstack) one n_embd part per
  // early layer, added to the hidden state after that layer.
  const float* embeddings = nullptr;
  const int64_t* positions = nullptr;  // [n_tokens] RoPE positions
  const TokenKind* kinds = nullptr;    // [n_tokens]
  // qwen2vl/qwen3vl only, optional: [n_tokens, 3] M-RoPE (t, h, w) positions per token
  // (visual tokens: vision/qwen2vl_positions.h; the fourth component is 0, as llama.cpp).
  // Null means (p, p, p, p) from `positions`, which is what text tokens get. Other
  // architectures reject it.
  const int64_t* mrope_positions = nullptr;
  // Optional: [n_tokens] per visual token, the mean dot product of its embedding with the
  // prompt's text token embeddings, passed to KvStepCache::attend (methods that keep salient visual tokens).
  const float* visual_similarity = nullptr;
  // The chunk's tokens see each other in full (gemma3 media chunks, libmtmd's non-causal
  // decode): KvStepCache::attend's non_causal. Only for architectures with media_non_causal.
  bool non_causal = false;
  // Optional (vlkv calibrate): called once per layer with the layer's q and k.
  const std::function<void(const LayerQk&)>* observer = nullptr;
};

enum class LogitsMode { kNone, kLast, kAll };

// One sequence's part of a batched step (TextDecoder::forward_batch).
struct BatchSequence {
  SeqId seq = -1;
  DecoderInput in;
  LogitsMode mode = LogitsMode::kLast;
  std::vector<float>* logits = nullptr;  // out: [n_out, n_vocab] (n_out = 0, 1 or in.n_tokens); may be null for kNone
  Status status;                         // out: ok, or why this sequence's step failed (then rolled back)
};

class TextDecoder {
 public:
  TextDecoder(const TextHparams& hp, const TextWeights& weights) : hp_(hp), w_(weights) {}

  // Runs the chunk through every layer, storing its K/V in `cache` for `seq`
  // and committing it. logits: [n_out, n_vocab] with n_out = 0, 1 or n_tokens.
  // On error (e.g. KV budget exhausted) the sequence is left as before the call.
  Status forward(const DecoderInput& in, KvStepCache& cache, SeqId seq, LogitsMode mode, std::vector<float>& logits,
                 ThreadPool& pool) const;

  // One forward pass advancing several sequences (distinct seq ids): one decode token of
  // some, prompt chunks of others. Per layer: norm over every row, each weight matmul over
  // all rows together (single-token rows through matmul_decode, prompt rows through the
  // f32 tiles, as a solo forward() of each would), attention per sequence over its own
  // cache. A sequence's logits equal those of its solo forward() bit for bit: its rows'
  // arithmetic does not depend on the other rows. A sequence whose input is invalid or whose
  // cache runs out of memory gets its own status and is rolled back; the others commit.
  // Returns non-ok only when the whole step failed (no sequence committed).
  Status forward_batch(std::span<BatchSequence> batch, KvStepCache& cache, ThreadPool& pool) const;

  const TextHparams& hparams() const { return hp_; }

 private:
  struct StepRows;  // where each sequence's rows sit in the step
  struct StepActs;  // the step's activation buffers

  Status check_input(const DecoderInput& in) const;
  // check_input plus what depends on the batch and the cache, for batch[i].
  Status check_step_input(std::span<const BatchSequence> batch, size_t i, const KvStepCache& cache) const;
  // Checks each sequence (its status) and lays out the rows of the valid ones.
  void lay_out(std::span<BatchSequence> batch, const KvStepCache& cache, StepRows& rows) const;
  void embed(std::span<const BatchSequence> batch, const StepRows& rows, std::vector<float>& x) const;
  void attention_block(int il, std::span<BatchSequence> batch, const StepRows& rows, KvStepCache& cache, StepActs& a,
                       ThreadPool& pool) const;
  bool reads_own_qk(int il, std::span<const BatchSequence> batch, const StepRows& rows, const KvStepCache& cache) const;
  void ffn_block(int il, int64_t n_dec, int64_t n_pro, StepActs& a, ThreadPool& pool) const;
  void add_deepstack(int il, std::span<const BatchSequence> batch, const StepRows& rows, std::vector<float>& x) const;
  void output_head(std::span<BatchSequence> batch, const StepRows& rows, StepActs& a, ThreadPool& pool) const;

  const TextHparams& hp_;
  const TextWeights& w_;
};

}  // namespace vlkv
