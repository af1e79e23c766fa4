#include "text/decoder.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/ops.h"

namespace vlkv {

Status TextDecoder::check_input(const DecoderInput& in) const {
  if (in.n_tokens <= 0) return invalid_argument("empty input chunk");
  if ((in.tokens == nullptr) == (in.embeddings == nullptr)) {
    return invalid_argument("a chunk needs exactly one of token ids or embeddings");
  }
  if (!in.positions || !in.kinds) return invalid_argument("chunk without positions or token kinds");
  if (in.mrope_positions && !hp_.uses_mrope()) {
    return invalid_argument("M-RoPE positions given to a '" + hp_.arch_name + "' model (only qwen2vl/qwen3vl use them)");
  }
  if (in.non_causal && !hp_.media_non_causal) {
    return invalid_argument("non-causal attention requested for a '" + hp_.arch_name + "' model");
  }
  if (in.tokens) {
    for (int64_t i = 0; i < in.n_tokens; ++i) {
      if (in.tokens[i] < 0 || in.tokens[i] >= hp_.n_vocab) {
        return invalid_argument("token id " + std::to_string(in.tokens[i]) + " is outside the vocabulary [0, " +
                                std::to_string(hp_.n_vocab) + ")");
      }
    }
  }
  return Status::ok();
}

namespace {

// q += bq, k += bk (qwen2), per-head RMSNorm of q and k (qwen3vl, gemma3), then the layer's
// RoPE (M-RoPE with mrope positions) on one sequence's projected rows.
//   q: [in.n_tokens, n_heads, head_dim], k: [in.n_tokens, n_kv_heads, head_dim]
void bias_rope_qk(const TextHparams& hp, const LayerWeights& l, const RopeParams& rope_p, const DecoderInput& in,
                  float* q, float* k, ThreadPool& pool) {
  const int64_t n = in.n_tokens;
  const int64_t head_dim = hp.head_dim;
  const int64_t q_dim = hp.n_heads * head_dim;
  const int64_t kv_dim = hp.n_kv_heads * head_dim;
  auto per_token = [&](const std::function<void(int64_t)>& fn) {
    pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) fn(t);
    }, /*min_per_thread=*/8);
  };
  if (!l.bq.empty())
    for (int64_t t = 0; t < n; ++t) add_inplace(&q[t * q_dim], l.bq.data(), q_dim);
  if (!l.bk.empty())
    for (int64_t t = 0; t < n; ++t) add_inplace(&k[t * kv_dim], l.bk.data(), kv_dim);
  if (!l.q_norm.empty()) {
    per_token([&](int64_t t) {
      for (int64_t h = 0; h < hp.n_heads; ++h) {
        float* qh = &q[t * q_dim + h * head_dim];
        rms_norm(qh, l.q_norm.data(), head_dim, hp.rms_eps, qh);
      }
      for (int64_t h = 0; h < hp.n_kv_heads; ++h) {
        float* kh = &k[t * kv_dim + h * head_dim];
        rms_norm(kh, l.k_norm.data(), head_dim, hp.rms_eps, kh);
      }
    });
  }
  if (in.mrope_positions) {
    // M-RoPE: (t, h, w) per token; the fourth position is 0, as libmtmd gives image tokens
    // (qwen2vl never reads it; qwen3vl's interleaved layout turns its last pair with it).
    per_token([&](int64_t t) {
      const int64_t* p3 = &in.mrope_positions[t * 3];
      const int64_t pos[4] = {p3[0], p3[1], p3[2], 0};
      rope_multi(&q[t * q_dim], static_cast<int>(hp.n_heads), static_cast<int>(head_dim), pos,
                 hp.rope_sections.data(), rope_p, hp.rope_interleaved);
      rope_multi(&k[t * kv_dim], static_cast<int>(hp.n_kv_heads), static_cast<int>(head_dim), pos,
                 hp.rope_sections.data(), rope_p, hp.rope_interleaved);
    });
  } else {
    // Text tokens of qwen2vl/qwen3vl too: with t = h = w = e, M-RoPE is NeoX RoPE.
    per_token([&](int64_t t) {
      rope(&q[t * q_dim], static_cast<int>(hp.n_heads), static_cast<int>(head_dim), in.positions[t], rope_p);
      rope(&k[t * kv_dim], static_cast<int>(hp.n_kv_heads), static_cast<int>(head_dim), in.positions[t], rope_p);
    });
  }
}

// Per-row work (norms, SwiGLU) split across threads for prefill: fn(t) for rows [first, first + count).
void per_row(ThreadPool& pool, int64_t first, int64_t count, const std::function<void(int64_t)>& fn) {
  pool.parallel_for(count, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) fn(first + t);
  }, /*min_per_thread=*/8);
}

// gemma3: RMSNorm of a block's output rows (proj: [n, n_embd]) before they join the residual stream.
void post_norm(const std::vector<float>& w, int64_t n, std::vector<float>& proj, ThreadPool& pool, float eps) {
  if (w.empty()) return;
  const int64_t n_embd = static_cast<int64_t>(w.size());
  per_row(pool, 0, n, [&](int64_t t) { rms_norm(&proj[t * n_embd], w.data(), n_embd, eps, &proj[t * n_embd]); });
}

// y[t] += bias for the n rows of y ([n, dim]); nothing without a bias.
void add_bias(std::vector<float>& y, const std::vector<float>& bias, int64_t dim, int64_t n) {
  if (bias.empty()) return;
  for (int64_t t = 0; t < n; ++t) add_inplace(&y[t * dim], bias.data(), dim);
}

}  // namespace

Status TextDecoder::forward(const DecoderInput& in, KvStepCache& cache, SeqId seq, LogitsMode mode,
                            std::vector<float>& logits, ThreadPool& pool) const {
  BatchSequence one;
  one.seq = seq;
  one.in = in;
  one.mode = mode;
  one.logits = &logits;
  VLKV_RETURN_IF_ERROR(forward_batch(std::span<BatchSequence>(&one, 1), cache, pool));
  if (one.status.is_ok() && mode == LogitsMode::kNone) logits.clear();
  return one.status;
}

// Where each sequence of a step sits in its activation rows: single-token sequences first
// (the decode block, matmul_decode), then prompt chunks (the f32 block).
struct TextDecoder::StepRows {
  std::vector<size_t> live;   // batch indices of the sequences the step runs, in row order
  std::vector<int64_t> row0;  // [batch.size()] first row of each live sequence
  int64_t n_decode = 0;       // rows of the decode block
  int64_t n_rows = 0;         // all rows
  int64_t n_prompt() const { return n_rows - n_decode; }
};

// The step's activations over all its rows (n = StepRows::n_rows).
struct TextDecoder::StepActs {
  StepActs(const TextHparams& hp, int64_t n)
      : x(n * hp.n_embd), xn(x.size()), q(n * hp.n_heads * hp.head_dim), k(n * hp.n_kv_heads * hp.head_dim),
        v(k.size()), attn(q.size()), proj(x.size()), gate(n * hp.n_ff), up(gate.size()) {}
  std::vector<float> x;     // [n, n_embd] residual stream
  std::vector<float> xn;    // [n, n_embd] normalized
  std::vector<float> q;     // [n, n_heads, head_dim]
  std::vector<float> k;     // [n, n_kv_heads, head_dim]
  std::vector<float> v;     // [n, n_kv_heads, head_dim]
  std::vector<float> attn;  // [n, n_heads, head_dim]
  std::vector<float> proj;  // [n, n_embd] attention / FFN output
  std::vector<float> gate;  // [n, n_ff]
  std::vector<float> up;    // [n, n_ff]
};

Status TextDecoder::forward_batch(std::span<BatchSequence> batch, KvStepCache& cache, ThreadPool& pool) const {
  StepRows rows;
  lay_out(batch, cache, rows);
  if (rows.live.empty()) return Status::ok();
  StepActs a(hp_, rows.n_rows);
  embed(batch, rows, a.x);
  for (int il = 0; il < hp_.n_layers; ++il) {
    attention_block(il, batch, rows, cache, a, pool);
    ffn_block(il, rows.n_decode, rows.n_prompt(), a, pool);
    add_deepstack(il, batch, rows, a.x);
  }
  for (size_t i : rows.live)
    if (batch[i].status.is_ok()) cache.commit(batch[i].seq, static_cast<int>(batch[i].in.n_tokens));
  output_head(batch, rows, a, pool);
  return Status::ok();
}

void TextDecoder::lay_out(std::span<BatchSequence> batch, const KvStepCache& cache, StepRows& rows) const {
  rows.row0.assign(batch.size(), -1);
  for (size_t i = 0; i < batch.size(); ++i) batch[i].status = check_step_input(batch, i, cache);
  for (int pass = 0; pass < 2; ++pass) {  // pass 0: single-token sequences, pass 1: prompt chunks
    for (size_t i = 0; i < batch.size(); ++i) {
      BatchSequence& b = batch[i];
      if (!b.status.is_ok() || (b.in.n_tokens == 1) != (pass == 0)) continue;
      rows.row0[i] = rows.n_rows;
      rows.n_rows += b.in.n_tokens;
      rows.live.push_back(i);
    }
    if (pass == 0) rows.n_decode = rows.n_rows;
  }
}

Status TextDecoder::check_step_input(std::span<const BatchSequence> batch, size_t i, const KvStepCache& cache) const {
  const BatchSequence& b = batch[i];
  VLKV_RETURN_IF_ERROR(check_input(b.in));
  for (size_t j = 0; j < i; ++j)
    if (batch[j].seq == b.seq) return invalid_argument("sequence " + std::to_string(b.seq) + " twice in one step");
  if (b.mode != LogitsMode::kNone && !b.logits) return invalid_argument("logits requested without an output buffer");
  // The cache's sliding-window mask counts positions in stored tokens (KvGeometry::layer_window).
  for (int64_t t = 0; hp_.sliding_window > 0 && t < b.in.n_tokens; ++t)
    if (b.in.positions[t] != cache.n_tokens(b.seq) + t)
      return invalid_argument("a sliding-window model needs consecutive positions from the cached token count "
                              "(position " + std::to_string(b.in.positions[t]) + " at token " +
                              std::to_string(cache.n_tokens(b.seq) + t) + ")");
  return Status::ok();
}

void TextDecoder::embed(std::span<const BatchSequence> batch, const StepRows& rows, std::vector<float>& x) const {
  const int64_t n_embd = hp_.n_embd;
  const int64_t n_embd_inp = hp_.n_embd_inp();  // embedding row stride (deepstack parts after the first)
  for (size_t i : rows.live) {
    const DecoderInput& in = batch[i].in;
    float* xi = &x[rows.row0[i] * n_embd];
    if (in.tokens) {
      for (int64_t t = 0; t < in.n_tokens; ++t) get_row(w_.token_embd, in.tokens[t], xi + t * n_embd);
      // gemma3: text tokens only; media embeddings enter unscaled (llama.cpp scales ubatch.token rows)
      if (hp_.embd_scale != 1.0f)
        for (int64_t j = 0; j < in.n_tokens * n_embd; ++j) xi[j] *= hp_.embd_scale;
    } else {
      for (int64_t t = 0; t < in.n_tokens; ++t) std::copy_n(in.embeddings + t * n_embd_inp, n_embd, xi + t * n_embd);
    }
  }
}

// Attention block: x += Wo · attention(rope(Wq·n(x)), rope(Wk·n(x)), Wv·n(x)), attention per
// sequence over its own cache (each call parallel over its heads).
void TextDecoder::attention_block(int il, std::span<BatchSequence> batch, const StepRows& rows, KvStepCache& cache,
                                  StepActs& a, ThreadPool& pool) const {
  const LayerWeights& l = w_.layers[il];
  const int64_t n = rows.n_rows, n_dec = rows.n_decode, n_pro = rows.n_prompt(), n_embd = hp_.n_embd;
  const int64_t q_dim = hp_.n_heads * hp_.head_dim, kv_dim = hp_.n_kv_heads * hp_.head_dim;
  per_row(pool, 0, n, [&](int64_t t) { rms_norm(&a.x[t * n_embd], l.attn_norm.data(), n_embd, hp_.rms_eps, &a.xn[t * n_embd]); });
  // Decode rows: Wq, Wk and Wv in one parallel loop over the same rounded rows. A layer whose
  // queries and keys all come from an earlier layer (the cache's plan) projects only V.
  const bool own_qk = reads_own_qk(il, batch, rows, cache);
  const MatvecTarget qkv[] = {{&l.wv, a.v.data()}, {&l.wq, a.q.data()}, {&l.wk, a.k.data()}};
  matvec_fused(std::span(qkv, own_qk ? 3 : 1), a.xn.data(), pool, n_dec);
  if (own_qk) {
    matmul(l.wq, &a.xn[n_dec * n_embd], n_pro, &a.q[n_dec * q_dim], pool);
    matmul(l.wk, &a.xn[n_dec * n_embd], n_pro, &a.k[n_dec * kv_dim], pool);
  }
  matmul(l.wv, &a.xn[n_dec * n_embd], n_pro, &a.v[n_dec * kv_dim], pool);
  add_bias(a.v, l.bv, kv_dim, n);
  for (size_t i : rows.live) {
    BatchSequence& b = batch[i];
    const DecoderInput& in = b.in;
    const int64_t r0 = rows.row0[i];
    float* q = &a.q[r0 * q_dim];
    float* k = &a.k[r0 * kv_dim];
    if (own_qk) bias_rope_qk(hp_, l, hp_.rope_for(il), in, q, k, pool);
    if (!b.status.is_ok()) continue;
    if (in.observer) (*in.observer)(LayerQk{il, in.n_tokens, q, k, in.kinds});
    Status st = cache.attend(b.seq, il, q, k, &a.v[r0 * kv_dim], in.kinds, static_cast<int>(in.n_tokens), hp_.attn_scale,
                             &a.attn[r0 * q_dim], pool, in.visual_similarity, in.non_causal);
    if (!st.is_ok()) {
      cache.rollback(b.seq);
      b.status = st;
      std::fill_n(&a.attn[r0 * q_dim], in.n_tokens * q_dim, 0.0f);  // its rows run on, unused
    }
  }
  matmul_step(l.wo, a.attn.data(), n_dec, n_pro, a.proj.data(), pool);
  post_norm(l.attn_post_norm, n, a.proj, pool, hp_.rms_eps);
  add_inplace(a.x.data(), a.proj.data(), n * n_embd);
}

// False when no live sequence's attention reads this layer's own q/k (every query and key
// comes from an earlier layer of the same step) and nobody observes them.
bool TextDecoder::reads_own_qk(int il, std::span<const BatchSequence> batch, const StepRows& rows,
                               const KvStepCache& cache) const {
  if (il == 0) return true;  // a plan shares only an earlier layer's q/k
  for (size_t i : rows.live) {
    const BatchSequence& b = batch[i];
    if (!b.status.is_ok()) continue;
    if (b.in.observer || cache.next_step_plan(b.seq, il, static_cast<int>(b.in.n_tokens)).reads_own_qk(il)) return true;
  }
  return false;
}

// Feed-forward block: x += W_down · (act(W_gate·n(x)) ⊙ W_up·n(x)), act = silu (SwiGLU) or,
// gemma3, ggml's f16-table GELU (GeGLU, as llama.cpp's ggml_geglu_split computes it).
void TextDecoder::ffn_block(int il, int64_t n_dec, int64_t n_pro, StepActs& a, ThreadPool& pool) const {
  const LayerWeights& l = w_.layers[il];
  const int64_t n = n_dec + n_pro, n_embd = hp_.n_embd, n_ff = hp_.n_ff;
  per_row(pool, 0, n, [&](int64_t t) { rms_norm(&a.x[t * n_embd], l.ffn_norm.data(), n_embd, hp_.rms_eps, &a.xn[t * n_embd]); });
  if (hp_.ffn_geglu) {
    const MatvecTarget gate_up[] = {{&l.w_gate, a.gate.data()}, {&l.w_up, a.up.data()}};
    matvec_fused(gate_up, a.xn.data(), pool, n_dec);
  } else {
    matvec_swiglu(l.w_gate, l.w_up, a.xn.data(), a.gate.data(), pool, n_dec);  // decode rows: one loop for both
  }
  matmul(l.w_gate, &a.xn[n_dec * n_embd], n_pro, &a.gate[n_dec * n_ff], pool);
  matmul(l.w_up, &a.xn[n_dec * n_embd], n_pro, &a.up[n_dec * n_ff], pool);
  if (hp_.ffn_geglu) {
    per_row(pool, 0, n, [&](int64_t t) {
      float* g = &a.gate[t * n_ff];
      gelu(g, n_ff, g);
      for (int64_t j = 0; j < n_ff; ++j) g[j] *= a.up[t * n_ff + j];
    });
  } else {
    per_row(pool, n_dec, n_pro, [&](int64_t t) { swiglu(&a.gate[t * n_ff], &a.up[t * n_ff], n_ff, &a.gate[t * n_ff]); });
  }
  matmul_step(l.w_down, a.gate.data(), n_dec, n_pro, a.proj.data(), pool);
  post_norm(l.ffn_post_norm, n, a.proj, pool, hp_.rms_eps);
  add_inplace(a.x.data(), a.proj.data(), n * n_embd);
}

// Deepstack (qwen3vl): embedding rows add their part il + 1 after layer il; token rows add
// nothing (llama.cpp's zero-padded token rows).
void TextDecoder::add_deepstack(int il, std::span<const BatchSequence> batch, const StepRows& rows,
                                std::vector<float>& x) const {
  if (il >= hp_.n_deepstack_layers) return;
  const int64_t n_embd = hp_.n_embd, n_embd_inp = hp_.n_embd_inp();
  for (size_t i : rows.live) {
    const DecoderInput& in = batch[i].in;
    if (!in.embeddings) continue;
    float* xi = &x[rows.row0[i] * n_embd];
    for (int64_t t = 0; t < in.n_tokens; ++t)
      add_inplace(xi + t * n_embd, in.embeddings + t * n_embd_inp + (il + 1) * n_embd, n_embd);
  }
}

// Output head over the rows each sequence wants: one-row outputs first (the decode block, as
// a solo forward's single row), then the rest.
void TextDecoder::output_head(std::span<BatchSequence> batch, const StepRows& rows, StepActs& a,
                              ThreadPool& pool) const {
  const int64_t n_embd = hp_.n_embd;
  std::vector<std::pair<size_t, int64_t>> outs;  // (batch index, first output row)
  int64_t n_out1 = 0, n_outs = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i : rows.live) {
      const BatchSequence& b = batch[i];
      if (!b.status.is_ok() || b.mode == LogitsMode::kNone) continue;
      const int64_t n_out = b.mode == LogitsMode::kAll ? b.in.n_tokens : 1;
      if ((n_out == 1) != (pass == 0)) continue;
      const int64_t first = rows.row0[i] + b.in.n_tokens - n_out;
      for (int64_t t = 0; t < n_out; ++t)
        rms_norm(&a.x[(first + t) * n_embd], w_.output_norm.data(), n_embd, hp_.rms_eps, &a.xn[(n_outs + t) * n_embd]);
      outs.emplace_back(i, n_outs);
      n_outs += n_out;
    }
    if (pass == 0) n_out1 = n_outs;
  }
  for (size_t i : rows.live)
    if (batch[i].status.is_ok() && batch[i].mode == LogitsMode::kNone && batch[i].logits) batch[i].logits->clear();
  if (n_outs == 0) return;
  std::vector<float> all_logits(n_outs * hp_.n_vocab);  // [n_outs, n_vocab]
  matmul_step(w_.output, a.xn.data(), n_out1, n_outs - n_out1, all_logits.data(), pool);
  for (size_t j = 0; j < outs.size(); ++j) {
    const int64_t end = j + 1 < outs.size() ? outs[j + 1].second : n_outs;
    const auto first = all_logits.begin() + outs[j].second * hp_.n_vocab;
    batch[outs[j].first].logits->assign(first, all_logits.begin() + end * hp_.n_vocab);
  }
}

}  // namespace vlkv
