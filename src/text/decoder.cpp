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

// Where each sequence of a step sits in its activation rows: single-token sequences first
// (the decode block, matmul_decode), then prompt chunks (the f32 block).
struct StepRows {
  std::vector<size_t> live;   // batch indices of the sequences the step runs, in row order
  std::vector<int64_t> row0;  // [batch.size()] first row of each live sequence
  int64_t n_decode = 0;       // rows of the decode block
  int64_t n_rows = 0;         // all rows
};

}  // namespace

Status TextDecoder::forward(const DecoderInput& in, KvCache& cache, SeqId seq, LogitsMode mode,
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

Status TextDecoder::forward_batch(std::span<BatchSequence> batch, KvCache& cache, ThreadPool& pool) const {
  const int64_t n_embd = hp_.n_embd;
  const int64_t head_dim = hp_.head_dim;
  const int64_t q_dim = hp_.n_heads * head_dim;
  const int64_t kv_dim = hp_.n_kv_heads * head_dim;
  const int64_t n_ff = hp_.n_ff;

  StepRows rows;
  rows.row0.assign(batch.size(), -1);
  for (int pass = 0; pass < 2; ++pass) {  // pass 0: single-token sequences, pass 1: prompt chunks
    for (size_t i = 0; i < batch.size(); ++i) {
      BatchSequence& b = batch[i];
      if (pass == 0) {
        b.status = check_input(b.in);
        for (size_t j = 0; j < i && b.status.is_ok(); ++j)
          if (batch[j].seq == b.seq) b.status = invalid_argument("sequence " + std::to_string(b.seq) + " twice in one step");
        if (b.status.is_ok() && b.mode != LogitsMode::kNone && !b.logits)
          b.status = invalid_argument("logits requested without an output buffer");
        // The cache's sliding-window mask counts positions in stored tokens (KvGeometry::layer_window).
        for (int64_t t = 0; b.status.is_ok() && hp_.sliding_window > 0 && t < b.in.n_tokens; ++t)
          if (b.in.positions[t] != cache.n_tokens(b.seq) + t)
            b.status = invalid_argument("a sliding-window model needs consecutive positions from the cached token "
                                        "count (position " + std::to_string(b.in.positions[t]) + " at token " +
                                        std::to_string(cache.n_tokens(b.seq) + t) + ")");
      }
      if (!b.status.is_ok() || (b.in.n_tokens == 1) != (pass == 0)) continue;
      rows.row0[i] = rows.n_rows;
      rows.n_rows += b.in.n_tokens;
      rows.live.push_back(i);
    }
    if (pass == 0) rows.n_decode = rows.n_rows;
  }
  if (rows.live.empty()) return Status::ok();
  const int64_t n = rows.n_rows;
  const int64_t n_dec = rows.n_decode, n_pro = n - n_dec;

  std::vector<float> x(n * n_embd);      // [n, n_embd] residual stream, the step's rows
  std::vector<float> xn(n * n_embd);     // [n, n_embd] normalized
  std::vector<float> q(n * q_dim);       // [n, n_heads, head_dim]
  std::vector<float> k(n * kv_dim);      // [n, n_kv_heads, head_dim]
  std::vector<float> v(n * kv_dim);      // [n, n_kv_heads, head_dim]
  std::vector<float> attn(n * q_dim);    // [n, n_heads, head_dim]
  std::vector<float> proj(n * n_embd);   // [n, n_embd] attention / FFN output
  std::vector<float> gate(n * n_ff);     // [n, n_ff]
  std::vector<float> up(n * n_ff);       // [n, n_ff]

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

  // Per-row work (norms, SwiGLU) is split across threads for prefill.
  auto per_row = [&](int64_t first, int64_t count, const std::function<void(int64_t)>& fn) {
    pool.parallel_for(count, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) fn(first + t);
    }, /*min_per_thread=*/8);
  };
  // gemma3: RMSNorm of a block's output rows (proj) before they join the residual stream.
  auto post_norm = [&](const std::vector<float>& w) {
    if (w.empty()) return;
    per_row(0, n, [&](int64_t t) { rms_norm(&proj[t * n_embd], w.data(), n_embd, hp_.rms_eps, &proj[t * n_embd]); });
  };
  auto add_bias = [&](std::vector<float>& y, const std::vector<float>& bias, int64_t dim) {
    if (bias.empty()) return;
    for (int64_t t = 0; t < n; ++t) add_inplace(&y[t * dim], bias.data(), dim);
  };

  // Q Cache: a lazy layer reuses the post-RoPE q and k of its base layer (the cache's
  // method decides which layers, per sequence; the decoder keeps the bases' q and k).
  std::vector<std::vector<LayerQkSource>> sources(batch.size());  // [batch][n_layers]
  std::vector<std::vector<float>> saved_q(hp_.n_layers), saved_k(hp_.n_layers);  // [n, q_dim], [n, kv_dim] of bases
  for (size_t i : rows.live) {
    sources[i].resize(hp_.n_layers);
    for (int64_t il = 0; il < hp_.n_layers; ++il) {
      sources[i][il] = cache.qk_source(batch[i].seq, static_cast<int>(il), static_cast<int>(batch[i].in.n_tokens));
      const int b = sources[i][il].base_layer;
      if (b >= il) return Status(StatusCode::kInternal, "a lazy layer's base layer must come before it");
      if (b >= 0) saved_q[b].resize(1);  // marks b as a base: keep its q and k
    }
  }
  auto failed = [&](size_t i) { return !batch[i].status.is_ok(); };

  for (int64_t il = 0; il < hp_.n_layers; ++il) {
    const LayerWeights& l = w_.layers[il];
    // GLA: a globally lazy layer computes no q/k projections (for the step when no sequence needs them).
    auto global_lazy = [&](size_t i) { return sources[i][il].base_layer >= 0 && !sources[i][il].visual_only; };
    bool any_own_qk = false;
    for (size_t i : rows.live) any_own_qk = any_own_qk || !global_lazy(i);

    // Attention block: x += Wo · attention(rope(Wq·n(x)), rope(Wk·n(x)), Wv·n(x)).
    per_row(0, n, [&](int64_t t) { rms_norm(&x[t * n_embd], l.attn_norm.data(), n_embd, hp_.rms_eps, &xn[t * n_embd]); });
    if (any_own_qk) {
      // Decode rows: Wq, Wk and Wv in one parallel loop over the same rounded rows.
      const MatvecTarget qkv[] = {{&l.wq, q.data()}, {&l.wk, k.data()}, {&l.wv, v.data()}};
      matvec_fused(qkv, xn.data(), pool, n_dec);
      matmul(l.wq, &xn[n_dec * n_embd], n_pro, &q[n_dec * q_dim], pool);
      matmul(l.wk, &xn[n_dec * n_embd], n_pro, &k[n_dec * kv_dim], pool);
      matmul(l.wv, &xn[n_dec * n_embd], n_pro, &v[n_dec * kv_dim], pool);
    } else {
      matmul_step(l.wv, xn.data(), n_dec, n_pro, v.data(), pool);
    }
    add_bias(v, l.bv, kv_dim);
    for (size_t i : rows.live) {
      const DecoderInput& in = batch[i].in;
      const LayerQkSource& src = sources[i][il];
      const int64_t r0 = rows.row0[i];
      if (global_lazy(i)) {
        std::copy_n(&saved_q[src.base_layer][r0 * q_dim], in.n_tokens * q_dim, &q[r0 * q_dim]);
        std::copy_n(&saved_k[src.base_layer][r0 * kv_dim], in.n_tokens * kv_dim, &k[r0 * kv_dim]);
        continue;
      }
      bias_rope_qk(hp_, l, hp_.rope_for(il), in, &q[r0 * q_dim], &k[r0 * kv_dim], pool);
      if (src.base_layer >= 0 && !src.base_scores) {  // VLA, shared keys: visual tokens' keys are the base layer's
        const std::vector<float>& bk = saved_k[src.base_layer];
        for (int64_t t = 0; t < in.n_tokens; ++t)
          if (in.kinds[t] == TokenKind::kVisual) std::copy_n(&bk[(r0 + t) * kv_dim], kv_dim, &k[(r0 + t) * kv_dim]);
      }
    }
    if (!saved_q[il].empty()) {
      saved_q[il] = q;
      saved_k[il] = k;
    }
    // Attention per sequence over its own cache (each call parallel over its heads).
    for (size_t i : rows.live) {
      if (failed(i)) continue;
      BatchSequence& b = batch[i];
      const DecoderInput& in = b.in;
      const LayerQkSource& src = sources[i][il];
      const int64_t r0 = rows.row0[i];
      const int nt = static_cast<int>(in.n_tokens);
      if (in.observer)
        (*in.observer)(LayerQk{static_cast<int>(il), in.n_tokens, &q[r0 * q_dim], &k[r0 * kv_dim], in.kinds});
      const bool exact_vla = src.base_layer >= 0 && src.base_scores;  // VLA: visual scores of the base layer
      Status st = cache.attend(b.seq, static_cast<int>(il), &q[r0 * q_dim], &k[r0 * kv_dim], &v[r0 * kv_dim], in.kinds,
                               nt, hp_.attn_scale, &attn[r0 * q_dim], pool, in.visual_similarity,
                               exact_vla ? &saved_q[src.base_layer][r0 * q_dim] : nullptr,
                               exact_vla ? &saved_k[src.base_layer][r0 * kv_dim] : nullptr, in.non_causal);
      if (!st.is_ok()) {
        cache.rollback(b.seq);
        b.status = st;
        std::fill_n(&attn[r0 * q_dim], in.n_tokens * q_dim, 0.0f);  // its rows run on, unused
      }
    }
    matmul_step(l.wo, attn.data(), n_dec, n_pro, proj.data(), pool);
    post_norm(l.attn_post_norm);
    add_inplace(x.data(), proj.data(), n * n_embd);

    // Feed-forward block: x += W_down · (act(W_gate·n(x)) ⊙ W_up·n(x)), act = silu (SwiGLU)
    // or, gemma3, ggml's f16-table GELU (GeGLU, as llama.cpp's ggml_geglu_split computes it).
    per_row(0, n, [&](int64_t t) { rms_norm(&x[t * n_embd], l.ffn_norm.data(), n_embd, hp_.rms_eps, &xn[t * n_embd]); });
    if (hp_.ffn_geglu) {
      const MatvecTarget gate_up[] = {{&l.w_gate, gate.data()}, {&l.w_up, up.data()}};
      matvec_fused(gate_up, xn.data(), pool, n_dec);
    } else {
      matvec_swiglu(l.w_gate, l.w_up, xn.data(), gate.data(), pool, n_dec);  // decode rows: one loop for both
    }
    matmul(l.w_gate, &xn[n_dec * n_embd], n_pro, &gate[n_dec * n_ff], pool);
    matmul(l.w_up, &xn[n_dec * n_embd], n_pro, &up[n_dec * n_ff], pool);
    if (hp_.ffn_geglu) {
      per_row(0, n, [&](int64_t t) {
        float* g = &gate[t * n_ff];
        gelu(g, n_ff, g);
        for (int64_t j = 0; j < n_ff; ++j) g[j] *= up[t * n_ff + j];
      });
    } else {
      per_row(n_dec, n_pro, [&](int64_t t) { swiglu(&gate[t * n_ff], &up[t * n_ff], n_ff, &gate[t * n_ff]); });
    }
    matmul_step(l.w_down, gate.data(), n_dec, n_pro, proj.data(), pool);
    post_norm(l.ffn_post_norm);
    add_inplace(x.data(), proj.data(), n * n_embd);

    // Deepstack (qwen3vl): embedding rows add their part il + 1 after layer il; token rows
    // add nothing (llama.cpp's zero-padded token rows).
    if (il < hp_.n_deepstack_layers) {
      for (size_t i : rows.live) {
        const DecoderInput& in = batch[i].in;
        if (!in.embeddings) continue;
        float* xi = &x[rows.row0[i] * n_embd];
        for (int64_t t = 0; t < in.n_tokens; ++t)
          add_inplace(xi + t * n_embd, in.embeddings + t * n_embd_inp + (il + 1) * n_embd, n_embd);
      }
    }
  }
  for (size_t i : rows.live)
    if (!failed(i)) cache.commit(batch[i].seq, static_cast<int>(batch[i].in.n_tokens));

  // Output head over the rows each sequence wants: one-row outputs first (the decode block,
  // as a solo forward's single row), then the rest.
  std::vector<std::pair<size_t, int64_t>> outs;  // (batch index, first output row)
  int64_t n_out1 = 0, n_outs = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i : rows.live) {
      const BatchSequence& b = batch[i];
      if (failed(i) || b.mode == LogitsMode::kNone) continue;
      const int64_t n_out = b.mode == LogitsMode::kAll ? b.in.n_tokens : 1;
      if ((n_out == 1) != (pass == 0)) continue;
      const int64_t first = rows.row0[i] + b.in.n_tokens - n_out;
      for (int64_t t = 0; t < n_out; ++t)
        rms_norm(&x[(first + t) * n_embd], w_.output_norm.data(), n_embd, hp_.rms_eps, &xn[(n_outs + t) * n_embd]);
      outs.emplace_back(i, n_outs);
      n_outs += n_out;
    }
    if (pass == 0) n_out1 = n_outs;
  }
  for (size_t i : rows.live)
    if (!failed(i) && batch[i].mode == LogitsMode::kNone && batch[i].logits) batch[i].logits->clear();
  if (n_outs == 0) return Status::ok();
  std::vector<float> all_logits(n_outs * hp_.n_vocab);  // [n_outs, n_vocab]
  matmul_step(w_.output, xn.data(), n_out1, n_outs - n_out1, all_logits.data(), pool);
  for (size_t j = 0; j < outs.size(); ++j) {
    const int64_t end = j + 1 < outs.size() ? outs[j + 1].second : n_outs;
    const auto first = all_logits.begin() + outs[j].second * hp_.n_vocab;
    batch[outs[j].first].logits->assign(first, all_logits.begin() + end * hp_.n_vocab);
  }
  return Status::ok();
}

}  // namespace vlkv
