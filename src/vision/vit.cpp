#include "vision/vit.h"

#include <cmath>
#include <string>

#include "base/check.h"
#include "kernels/ops.h"
#include "kernels/vit_ops.h"

namespace vlkv {

void linear(const WeightMatrix& w, const std::vector<float>& b, const float* x, int64_t n, float* y,
            ThreadPool& pool) {
  matmul(w, x, n, y, pool);
  if (b.empty()) return;
  for (int64_t t = 0; t < n; ++t) add_inplace(y + t * w.n_rows, b.data(), w.n_rows);
}

Result<VitWeights> bind_vit_weights(const GgufFile& g, const ClipVisionHparams& hp, int64_t n_layers_used) {
  VitWeights w;
  const int64_t e = hp.n_embd;
  const int64_t p = hp.patch_size;
  const int64_t n_patches = (hp.image_size / p) * (hp.image_size / p);
  VLKV_ASSIGN_OR_RETURN(w.patch_w, read_vision_tensor(g, "v.patch_embd.weight", {p, p, 3, e}));
  VLKV_ASSIGN_OR_RETURN(w.patch_b, read_optional_vision_tensor(g, "v.patch_embd.bias", {e}));
  VLKV_ASSIGN_OR_RETURN(w.class_embd, read_optional_vision_tensor(g, "v.class_embd", {e}));
  const int64_t n_pos = n_patches + (w.class_embd.empty() ? 0 : 1);
  VLKV_ASSIGN_OR_RETURN(w.position_embd, read_vision_tensor(g, "v.position_embd.weight", {e, n_pos}));
  VLKV_ASSIGN_OR_RETURN(w.pre_ln_w, read_optional_vision_tensor(g, "v.pre_ln.weight", {e}));
  VLKV_ASSIGN_OR_RETURN(w.pre_ln_b, read_optional_vision_tensor(g, "v.pre_ln.bias", {e}));
  VLKV_ASSIGN_OR_RETURN(w.post_ln_w, read_optional_vision_tensor(g, "v.post_ln.weight", {e}));
  VLKV_ASSIGN_OR_RETURN(w.post_ln_b, read_optional_vision_tensor(g, "v.post_ln.bias", {e}));
  if (n_layers_used < 0 || n_layers_used > hp.n_layers) return invalid_file("bad number of ViT layers");
  w.layers.resize(static_cast<size_t>(n_layers_used));
  for (int64_t il = 0; il < n_layers_used; ++il) {
    VitLayerWeights& l = w.layers[static_cast<size_t>(il)];
    const std::string b = "v.blk." + std::to_string(il) + ".";
    VLKV_ASSIGN_OR_RETURN(l.ln1_w, read_vision_tensor(g, b + "ln1.weight", {e}));
    VLKV_ASSIGN_OR_RETURN(l.ln1_b, read_optional_vision_tensor(g, b + "ln1.bias", {e}));
    VLKV_ASSIGN_OR_RETURN(l.ln2_w, read_vision_tensor(g, b + "ln2.weight", {e}));
    VLKV_ASSIGN_OR_RETURN(l.ln2_b, read_optional_vision_tensor(g, b + "ln2.bias", {e}));
    VLKV_ASSIGN_OR_RETURN(l.wq, bind_vision_matrix(g, b + "attn_q.weight", e, e));
    VLKV_ASSIGN_OR_RETURN(l.wk, bind_vision_matrix(g, b + "attn_k.weight", e, e));
    VLKV_ASSIGN_OR_RETURN(l.wv, bind_vision_matrix(g, b + "attn_v.weight", e, e));
    VLKV_ASSIGN_OR_RETURN(l.wo, bind_vision_matrix(g, b + "attn_out.weight", e, e));
    VLKV_ASSIGN_OR_RETURN(l.bq, read_optional_vision_tensor(g, b + "attn_q.bias", {e}));
    VLKV_ASSIGN_OR_RETURN(l.bk, read_optional_vision_tensor(g, b + "attn_k.bias", {e}));
    VLKV_ASSIGN_OR_RETURN(l.bv, read_optional_vision_tensor(g, b + "attn_v.bias", {e}));
    VLKV_ASSIGN_OR_RETURN(l.bo, read_optional_vision_tensor(g, b + "attn_out.bias", {e}));
    VLKV_ASSIGN_OR_RETURN(l.ffn_up, bind_vision_matrix(g, b + "ffn_up.weight", e, hp.n_ff));
    VLKV_ASSIGN_OR_RETURN(l.ffn_up_b, read_optional_vision_tensor(g, b + "ffn_up.bias", {hp.n_ff}));
    VLKV_ASSIGN_OR_RETURN(l.ffn_down, bind_vision_matrix(g, b + "ffn_down.weight", hp.n_ff, e));
    VLKV_ASSIGN_OR_RETURN(l.ffn_down_b, read_optional_vision_tensor(g, b + "ffn_down.bias", {e}));
  }
  return w;
}

int64_t Vit::n_tokens() const {
  const int64_t side = n_patches_side();
  return side * side + (w_.class_embd.empty() ? 0 : 1);
}

void Vit::embed(const ImageTensor& img, std::vector<float>& x, ThreadPool& pool) const {
  const int64_t e = hp_.n_embd;
  const int64_t p = hp_.patch_size;
  const int64_t side = n_patches_side();
  VLKV_CHECK(img.width == hp_.image_size && img.height == hp_.image_size);
  const int64_t n_patches = side * side;
  const int64_t k = 3 * p * p;
  // im2col: patch (py, px) row-major -> [c, ky, kx], the conv kernel's order.
  std::vector<float> cols(static_cast<size_t>(n_patches * k));  // [n_patches, 3*p*p]
  for (int64_t py = 0; py < side; ++py) {
    for (int64_t px = 0; px < side; ++px) {
      float* dst = &cols[static_cast<size_t>((py * side + px) * k)];
      for (int64_t c = 0; c < 3; ++c) {
        for (int64_t ky = 0; ky < p; ++ky) {
          const float* src = &img.data[static_cast<size_t>((c * img.height + py * p + ky) * img.width + px * p)];
          for (int64_t kx = 0; kx < p; ++kx) *dst++ = src[kx];
        }
      }
    }
  }
  const WeightMatrix kernel{GgmlType::kF32, reinterpret_cast<const uint8_t*>(w_.patch_w.data()), e, k,
                            static_cast<size_t>(k) * sizeof(float)};
  const int64_t first = w_.class_embd.empty() ? 0 : 1;
  const int64_t n = n_tokens();
  x.assign(static_cast<size_t>(n * e), 0.0f);  // [n_tokens, n_embd]
  linear(kernel, w_.patch_b, cols.data(), n_patches, &x[static_cast<size_t>(first * e)], pool);
  if (first) std::copy(w_.class_embd.begin(), w_.class_embd.end(), x.begin());
  add_inplace(x.data(), w_.position_embd.data(), n * e);
  if (!w_.pre_ln_w.empty()) {
    for (int64_t t = 0; t < n; ++t) {
      float* row = &x[static_cast<size_t>(t * e)];
      layer_norm(row, w_.pre_ln_w.data(), w_.pre_ln_b.empty() ? nullptr : w_.pre_ln_b.data(), e, hp_.eps, row);
    }
  }
}

void Vit::layer(int64_t il, std::vector<float>& x, int64_t n, VitFfn ffn, ThreadPool& pool) const {
  const VitLayerWeights& l = w_.layers[static_cast<size_t>(il)];
  const int64_t e = hp_.n_embd;
  std::vector<float> xn(static_cast<size_t>(n * e));        // [n, n_embd]
  std::vector<float> q(xn.size()), k(xn.size()), v(xn.size()), attn(xn.size()), proj(xn.size());
  std::vector<float> hidden(static_cast<size_t>(n * hp_.n_ff));  // [n, n_ff]
  auto norm_rows = [&](const std::vector<float>& w, const std::vector<float>& b) {
    for (int64_t t = 0; t < n; ++t) {
      layer_norm(&x[static_cast<size_t>(t * e)], w.data(), b.empty() ? nullptr : b.data(), e, hp_.eps,
                 &xn[static_cast<size_t>(t * e)]);
    }
  };

  // x += Wo · softmax(Q Kᵀ / sqrt(head_dim)) V, with Q, K, V = W · LN1(x) + b.
  norm_rows(l.ln1_w, l.ln1_b);
  linear(l.wq, l.bq, xn.data(), n, q.data(), pool);
  linear(l.wk, l.bk, xn.data(), n, k.data(), pool);
  linear(l.wv, l.bv, xn.data(), n, v.data(), pool);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hp_.head_dim));
  attention_full(q.data(), k.data(), v.data(), n, static_cast<int>(hp_.n_heads), static_cast<int>(hp_.head_dim),
                 scale, attn.data(), pool);
  linear(l.wo, l.bo, attn.data(), n, proj.data(), pool);
  add_inplace(x.data(), proj.data(), n * e);

  // x += W_down · act(W_up · LN2(x) + b_up) + b_down.
  norm_rows(l.ln2_w, l.ln2_b);
  linear(l.ffn_up, l.ffn_up_b, xn.data(), n, hidden.data(), pool);
  if (ffn == VitFfn::kGelu) {
    gelu(hidden.data(), static_cast<int64_t>(hidden.size()), hidden.data());
  } else {
    for (float& h : hidden) h = h / (1.0f + std::exp(-h));
  }
  linear(l.ffn_down, l.ffn_down_b, hidden.data(), n, proj.data(), pool);
  add_inplace(x.data(), proj.data(), n * e);
}

void Vit::post_norm(std::vector<float>& x, int64_t n) const {
  if (w_.post_ln_w.empty()) return;
  const int64_t e = hp_.n_embd;
  for (int64_t t = 0; t < n; ++t) {
    float* row = &x[static_cast<size_t>(t * e)];
    layer_norm(row, w_.post_ln_w.data(), w_.post_ln_b.empty() ? nullptr : w_.post_ln_b.data(), e, hp_.eps, row);
  }
}

}  // namespace vlkv
