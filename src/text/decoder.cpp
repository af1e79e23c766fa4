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
  if (in.mrope_positions && hp_.arch != TextArch::kQwen2Vl) {
    return invalid_argument("M-RoPE positions given to a '" + hp_.arch_name + "' model (only qwen2vl uses them)");
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

// q += bq, k += bk, then RoPE (M-RoPE with mrope positions) on the chunk's projected q and k.
void bias_rope_qk(const TextHparams& hp, const LayerWeights& l, const DecoderInput& in, std::vector<float>& q,
                  std::vector<float>& k, ThreadPool& pool) {
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
  if (in.mrope_positions) {
    // M-RoPE: (t, h, w) per token; the fourth section (unused by qwen2vl) gets 0, as in llama.cpp.
    per_token([&](int64_t t) {
      const int64_t* p3 = &in.mrope_positions[t * 3];
      const int64_t pos[4] = {p3[0], p3[1], p3[2], 0};
      rope_multi(&q[t * q_dim], static_cast<int>(hp.n_heads), static_cast<int>(head_dim), pos,
                 hp.rope_sections.data(), hp.rope);
      rope_multi(&k[t * kv_dim], static_cast<int>(hp.n_kv_heads), static_cast<int>(head_dim), pos,
                 hp.rope_sections.data(), hp.rope);
    });
  } else {
    // Text tokens of qwen2vl too: with t = h = w, M-RoPE is NeoX RoPE.
    per_token([&](int64_t t) {
      rope(&q[t * q_dim], static_cast<int>(hp.n_heads), static_cast<int>(head_dim), in.positions[t], hp.rope);
      rope(&k[t * kv_dim], static_cast<int>(hp.n_kv_heads), static_cast<int>(head_dim), in.positions[t], hp.rope);
    });
  }
}

}  // namespace

// q = rope(Wq·xn + bq), k = rope(Wk·xn + bk) for the chunk's tokens.
void TextDecoder::project_qk(const LayerWeights& l, const DecoderInput& in, const std::vector<float>& xn,
                             std::vector<float>& q, std::vector<float>& k, ThreadPool& pool) const {
  matmul(l.wq, xn.data(), in.n_tokens, q.data(), pool);
  matmul(l.wk, xn.data(), in.n_tokens, k.data(), pool);
  bias_rope_qk(hp_, l, in, q, k, pool);
}

Status TextDecoder::forward(const DecoderInput& in, KvCache& cache, SeqId seq, LogitsMode mode,
                            std::vector<float>& logits, ThreadPool& pool) const {
  VLKV_RETURN_IF_ERROR(check_input(in));
  const int64_t n = in.n_tokens;
  const int64_t n_embd = hp_.n_embd;
  const int64_t head_dim = hp_.head_dim;
  const int64_t q_dim = hp_.n_heads * head_dim;
  const int64_t kv_dim = hp_.n_kv_heads * head_dim;

  std::vector<float> x(n * n_embd);      // [n, n_embd] residual stream
  std::vector<float> xn(n * n_embd);     // [n, n_embd] normalized
  std::vector<float> q(n * q_dim);       // [n, n_heads, head_dim]
  std::vector<float> k(n * kv_dim);      // [n, n_kv_heads, head_dim]
  std::vector<float> v(n * kv_dim);      // [n, n_kv_heads, head_dim]
  std::vector<float> attn(n * q_dim);    // [n, n_heads, head_dim]
  std::vector<float> proj(n * n_embd);   // [n, n_embd] attention / FFN output
  std::vector<float> gate(n * hp_.n_ff); // [n, n_ff]
  std::vector<float> up(n * hp_.n_ff);   // [n, n_ff]

  if (in.tokens) {
    for (int64_t t = 0; t < n; ++t) get_row(w_.token_embd, in.tokens[t], &x[t * n_embd]);
  } else {
    std::memcpy(x.data(), in.embeddings, sizeof(float) * n * n_embd);
  }

  // Per-token work (norms, RoPE, SwiGLU) is split across threads for prefill.
  auto per_token = [&](const std::function<void(int64_t)>& fn) {
    pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) fn(t);
    }, /*min_per_thread=*/8);
  };
  auto add_bias = [&](std::vector<float>& y, const std::vector<float>& bias, int64_t dim) {
    if (bias.empty()) return;
    for (int64_t t = 0; t < n; ++t) add_inplace(&y[t * dim], bias.data(), dim);
  };

  // Q Cache: a lazy layer reuses the post-RoPE q and k of its base layer (the cache's
  // method decides which layers; the decoder keeps the bases' q and k for the step).
  std::vector<LayerQkSource> sources(hp_.n_layers);
  std::vector<std::vector<float>> saved_q(hp_.n_layers), saved_k(hp_.n_layers);  // [n, q_dim], [n, kv_dim] of bases
  for (int64_t il = 0; il < hp_.n_layers; ++il) {
    sources[il] = cache.qk_source(seq, static_cast<int>(il), static_cast<int>(n));
    const int b = sources[il].base_layer;
    if (b >= il) return Status(StatusCode::kInternal, "a lazy layer's base layer must come before it");
    if (b >= 0) saved_q[b].resize(1);  // marks b as a base: keep its q and k
  }

  for (int64_t il = 0; il < hp_.n_layers; ++il) {
    const LayerWeights& l = w_.layers[il];
    const LayerQkSource& src = sources[il];
    const bool global_lazy = src.base_layer >= 0 && !src.visual_only;  // GLA: no q/k projections at all

    // Attention block: x += Wo · attention(rope(Wq·n(x)), rope(Wk·n(x)), Wv·n(x)).
    per_token([&](int64_t t) { rms_norm(&x[t * n_embd], l.attn_norm.data(), n_embd, hp_.rms_eps, &xn[t * n_embd]); });
    if (n == 1 && !global_lazy) {
      // Decode: Wq, Wk and Wv in one parallel loop over the same rounded input.
      const MatvecTarget qkv[] = {{&l.wq, q.data()}, {&l.wk, k.data()}, {&l.wv, v.data()}};
      matvec_fused(qkv, xn.data(), pool);
    } else {
      matmul(l.wv, xn.data(), n, v.data(), pool);
    }
    add_bias(v, l.bv, kv_dim);
    if (global_lazy) {
      q = saved_q[src.base_layer];
      k = saved_k[src.base_layer];
    } else {
      if (n == 1) {
        bias_rope_qk(hp_, l, in, q, k, pool);
      } else {
        project_qk(l, in, xn, q, k, pool);
      }
      if (src.base_layer >= 0 && !src.base_scores) {  // VLA, shared keys: visual tokens' keys are the base layer's
        const std::vector<float>& bk = saved_k[src.base_layer];
        for (int64_t t = 0; t < n; ++t)
          if (in.kinds[t] == TokenKind::kVisual) std::copy_n(&bk[t * kv_dim], kv_dim, &k[t * kv_dim]);
      }
    }
    if (!saved_q[il].empty()) {
      saved_q[il] = q;
      saved_k[il] = k;
    }
    if (in.observer) (*in.observer)(LayerQk{static_cast<int>(il), n, q.data(), k.data(), in.kinds});
    const bool exact_vla = src.base_layer >= 0 && src.base_scores;  // VLA: visual scores of the base layer
    Status st = cache.attend(seq, static_cast<int>(il), q.data(), k.data(), v.data(), in.kinds, static_cast<int>(n),
                             hp_.attn_scale, attn.data(), pool, in.visual_similarity,
                             exact_vla ? saved_q[src.base_layer].data() : nullptr,
                             exact_vla ? saved_k[src.base_layer].data() : nullptr);
    if (!st.is_ok()) {
      cache.rollback(seq);
      return st;
    }
    matmul(l.wo, attn.data(), n, proj.data(), pool);
    add_inplace(x.data(), proj.data(), n * n_embd);

    // Feed-forward block: x += W_down · (silu(W_gate·n(x)) ⊙ W_up·n(x)).
    per_token([&](int64_t t) { rms_norm(&x[t * n_embd], l.ffn_norm.data(), n_embd, hp_.rms_eps, &xn[t * n_embd]); });
    if (n == 1) {
      matvec_swiglu(l.w_gate, l.w_up, xn.data(), gate.data(), pool);  // decode: one loop for both
    } else {
      matmul(l.w_gate, xn.data(), n, gate.data(), pool);
      matmul(l.w_up, xn.data(), n, up.data(), pool);
      per_token([&](int64_t t) { swiglu(&gate[t * hp_.n_ff], &up[t * hp_.n_ff], hp_.n_ff, &gate[t * hp_.n_ff]); });
    }
    matmul(l.w_down, gate.data(), n, proj.data(), pool);
    add_inplace(x.data(), proj.data(), n * n_embd);
  }
  cache.commit(seq, static_cast<int>(n));

  // Output head over the rows the caller wants.
  const int64_t first = mode == LogitsMode::kAll ? 0 : n - 1;
  const int64_t n_out = mode == LogitsMode::kNone ? 0 : n - first;
  logits.resize(static_cast<size_t>(n_out * hp_.n_vocab));
  if (n_out == 0) return Status::ok();
  for (int64_t t = 0; t < n_out; ++t) {
    rms_norm(&x[(first + t) * n_embd], w_.output_norm.data(), n_embd, hp_.rms_eps, &xn[t * n_embd]);
  }
  matmul(w_.output, xn.data(), n_out, logits.data(), pool);
  return Status::ok();
}

}  // namespace vlkv
