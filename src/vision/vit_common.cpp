#include "vision/vit_common.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <span>

#include "base/check.h"
#include "kernels/attention_f32.h"
#include "kernels/gemm_f32.h"
#include "kernels/gemm_q8.h"
#include "kernels/ops.h"
#include "quant/weight_format.h"

namespace vlkv {
namespace {

constexpr int64_t kMaxVitDim = 1 << 16;
constexpr int64_t kMaxVitLayers = 1024;

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "{";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "}";
}

Result<int64_t> read_dim(const GgufFile& g, const std::string& key, bool required, int64_t fallback = 0) {
  Result<int64_t> v = g.get_i64(key);
  if (!v.is_ok()) {
    if (v.status().code() == StatusCode::kNotFound) {
      if (!required) return fallback;
      return invalid_file("mmproj: missing metadata key '" + key + "'");
    }
    return v.status();
  }
  if (*v <= 0 || *v > kMaxVitDim) {
    return invalid_file("mmproj: metadata '" + key + "' = " + std::to_string(*v) + " is out of range");
  }
  return *v;
}

Result<bool> read_bool(const GgufFile& g, const std::string& key) {
  Result<bool> v = g.get_bool(key);
  if (!v.is_ok()) {
    if (v.status().code() == StatusCode::kNotFound) return false;
    return v.status();
  }
  return *v;
}

Status read_triplet(const GgufFile& g, const std::string& key, float out[3]) {
  Result<std::vector<double>> v = g.get_f64_array(key);
  if (!v.is_ok()) {
    if (v.status().code() == StatusCode::kNotFound) return invalid_file("mmproj: missing metadata key '" + key + "'");
    return v.status();
  }
  if (v->size() != 3) return invalid_file("mmproj: '" + key + "' must hold 3 values");
  for (int c = 0; c < 3; ++c) {
    if (!std::isfinite((*v)[c])) return invalid_file("mmproj: '" + key + "' is not finite");
    out[c] = static_cast<float>((*v)[c]);
  }
  return Status::ok();
}

}  // namespace

Result<VitHparams> read_vit_hparams(const GgufFile& g) {
  VitHparams hp;
  Result<std::string> type = g.get_string("clip.projector_type");
  if (type.is_ok()) {
    hp.projector_type = *type;
  } else if (type.status().code() == StatusCode::kNotFound) {
    hp.projector_type = "mlp";  // old LLaVA-1.5 files predate the key
  } else {
    return type.status();
  }
  VLKV_ASSIGN_OR_RETURN(hp.image_size, read_dim(g, "clip.vision.image_size", true));
  VLKV_ASSIGN_OR_RETURN(hp.patch_size, read_dim(g, "clip.vision.patch_size", true));
  VLKV_ASSIGN_OR_RETURN(hp.n_embd, read_dim(g, "clip.vision.embedding_length", true));
  VLKV_ASSIGN_OR_RETURN(hp.n_ff, read_dim(g, "clip.vision.feed_forward_length", true));
  VLKV_ASSIGN_OR_RETURN(hp.n_layers, read_dim(g, "clip.vision.block_count", true));
  VLKV_ASSIGN_OR_RETURN(hp.n_heads, read_dim(g, "clip.vision.attention.head_count", true));
  VLKV_ASSIGN_OR_RETURN(hp.projection_dim, read_dim(g, "clip.vision.projection_dim", false, 0));
  if (hp.n_layers > kMaxVitLayers) return invalid_file("mmproj: too many ViT layers");
  if (hp.n_embd % hp.n_heads != 0) return invalid_file("mmproj: embedding_length is not a multiple of head_count");
  hp.head_dim = hp.n_embd / hp.n_heads;
  // image_size need not be a multiple of patch_size: the patch conv (stride = patch) covers
  // floor(image_size / patch_size) patches a side and skips the rest, as ggml_conv_2d does
  // (SigLIP so400m-patch14-384, SmolVLM2-2.2B's encoder: 27 x 27 patches over 378 of 384 px).
  if (hp.patch_size > hp.image_size) return invalid_file("mmproj: patch_size is larger than image_size");
  Result<double> eps = g.get_f64("clip.vision.attention.layer_norm_epsilon");
  if (eps.is_ok()) {
    if (!(*eps > 0 && *eps < 1)) return invalid_file("mmproj: layer_norm_epsilon out of range");
    hp.eps = static_cast<float>(*eps);
  } else if (eps.status().code() != StatusCode::kNotFound) {
    return eps.status();
  }
  VLKV_RETURN_IF_ERROR(read_triplet(g, "clip.vision.image_mean", hp.image_mean));
  VLKV_RETURN_IF_ERROR(read_triplet(g, "clip.vision.image_std", hp.image_std));
  for (int c = 0; c < 3; ++c) {
    if (!(hp.image_std[c] > 0)) return invalid_file("mmproj: image_std must be > 0");
  }
  VLKV_ASSIGN_OR_RETURN(bool use_gelu, read_bool(g, "clip.use_gelu"));
  VLKV_ASSIGN_OR_RETURN(bool use_silu, read_bool(g, "clip.use_silu"));
  if (use_gelu && use_silu) return invalid_file("mmproj: both clip.use_gelu and clip.use_silu are set");
  hp.ffn_op = use_gelu ? VitFfnOp::kGelu : use_silu ? VitFfnOp::kSilu : VitFfnOp::kGeluQuick;
  Result<std::vector<int64_t>> fl = g.get_i64_array("clip.vision.feature_layer");
  if (fl.is_ok()) {
    for (int64_t l : *fl) {
      if (l < 0 || l > hp.n_layers) {
        return invalid_file("mmproj: clip.vision.feature_layer holds layer " + std::to_string(l));
      }
    }
    hp.feature_layers = *fl;
  } else if (fl.status().code() != StatusCode::kNotFound) {
    return fl.status();
  }
  return hp;
}

Result<WeightMatrix> bind_vit_matrix(const GgufFile& g, const std::string& name, int64_t n_cols, int64_t n_rows) {
  const GgufTensorInfo* t = g.find_tensor(name);
  if (!t) return invalid_file("mmproj: missing tensor '" + name + "'");
  int64_t cols = 1;
  for (size_t i = 0; i + 1 < t->dims.size(); ++i) cols *= t->dims[i];
  if (t->dims.size() < 2 || cols != n_cols || t->dims.back() != n_rows) {
    return invalid_file("mmproj: tensor '" + name + "' has dims " + dims_str(t->dims) + ", expected " +
                        std::to_string(n_cols) + " x " + std::to_string(n_rows));
  }
  const WeightFormat* f = find_weight_format(t->type);
  if (!f || n_cols % f->block_elems != 0) {
    return unsupported("mmproj: tensor '" + name + "' has unsupported weight type " + ggml_type_name(t->type));
  }
  VLKV_ASSIGN_OR_RETURN(size_t rb, row_bytes(t->type, n_cols));
  if (rb * static_cast<uint64_t>(n_rows) != t->n_bytes) {
    return invalid_file("mmproj: tensor '" + name + "' byte size does not match its shape");
  }
  return WeightMatrix{t->type, t->data, n_rows, n_cols, rb};
}

Result<std::vector<float>> bind_vit_vector(const GgufFile& g, const std::string& name, int64_t n) {
  const GgufTensorInfo* t = g.find_tensor(name);
  if (!t) return invalid_file("mmproj: missing tensor '" + name + "'");
  if (t->dims.size() != 1 || t->dims[0] != n) {
    return invalid_file("mmproj: tensor '" + name + "' has dims " + dims_str(t->dims) + ", expected {" +
                        std::to_string(n) + "}");
  }
  const WeightFormat* f = find_weight_format(t->type);
  if (!f || n % f->block_elems != 0) {
    return unsupported("mmproj: tensor '" + name + "' has unsupported type " + ggml_type_name(t->type));
  }
  VLKV_ASSIGN_OR_RETURN(size_t rb, row_bytes(t->type, n));
  if (rb != t->n_bytes) return invalid_file("mmproj: tensor '" + name + "' byte size does not match its shape");
  std::vector<float> out(static_cast<size_t>(n));
  f->dequantize_row_ref(t->data, out.data(), n);
  return out;
}

Result<std::vector<float>> bind_vit_vector_optional(const GgufFile& g, const std::string& name, int64_t n) {
  if (!g.find_tensor(name)) return std::vector<float>{};
  return bind_vit_vector(g, name, n);
}

Status bind_vit_norm_optional(const GgufFile& g, const std::string& name, int64_t n, std::vector<float>& w,
                              std::vector<float>& b) {
  if (!g.find_tensor(name + ".weight")) return Status::ok();
  VLKV_ASSIGN_OR_RETURN(w, bind_vit_vector(g, name + ".weight", n));
  VLKV_ASSIGN_OR_RETURN(b, bind_vit_vector_optional(g, name + ".bias", n));
  return Status::ok();
}

Status bind_vit_mlp(const GgufFile& g, const std::string& w1, const std::string& b1, const std::string& w2,
                    const std::string& b2, int64_t n_in, int64_t n_out, WeightMatrix& fc1, std::vector<float>& fc1_b,
                    WeightMatrix& fc2, std::vector<float>& fc2_b) {
  const GgufTensorInfo* t1 = g.find_tensor(w1);
  const GgufTensorInfo* t2 = g.find_tensor(w2);
  if (!t1 || !t2 || t1->dims.size() != 2 || t2->dims.size() != 2) {
    return invalid_file("mmproj: missing or malformed tensors '" + w1 + "' / '" + w2 + "'");
  }
  const int64_t hidden = t1->dims[1];
  const int64_t out = n_out > 0 ? n_out : t2->dims[1];
  VLKV_ASSIGN_OR_RETURN(fc1, bind_vit_matrix(g, w1, n_in, hidden));
  VLKV_ASSIGN_OR_RETURN(fc1_b, bind_vit_vector(g, b1, hidden));
  VLKV_ASSIGN_OR_RETURN(fc2, bind_vit_matrix(g, w2, hidden, out));
  VLKV_ASSIGN_OR_RETURN(fc2_b, bind_vit_vector(g, b2, out));
  return Status::ok();
}

Result<WeightMatrix> bind_vit_patch_kernel(const GgufFile& g, const std::string& name, int64_t patch, int64_t n_out) {
  const GgufTensorInfo* t = g.find_tensor(name);
  if (!t) return invalid_file("mmproj: missing tensor '" + name + "'");
  if (t->dims != std::vector<int64_t>{patch, patch, 3, n_out}) {
    return invalid_file("mmproj: tensor '" + name + "' has dims " + dims_str(t->dims) + ", expected {" +
                        std::to_string(patch) + ", " + std::to_string(patch) + ", 3, " + std::to_string(n_out) + "}");
  }
  return bind_vit_matrix(g, name, 3 * patch * patch, n_out);
}

Status bind_vit_block_after_qkv(const GgufFile& g, const VitHparams& hp, const std::string& p, VitLayer& l) {
  const int64_t d = hp.n_embd;
  VLKV_ASSIGN_OR_RETURN(l.wo, bind_vit_matrix(g, p + "attn_out.weight", d, d));
  VLKV_ASSIGN_OR_RETURN(l.bo, bind_vit_vector_optional(g, p + "attn_out.bias", d));
  VLKV_ASSIGN_OR_RETURN(l.ln2_w, bind_vit_vector(g, p + "ln2.weight", d));
  VLKV_ASSIGN_OR_RETURN(l.ln2_b, bind_vit_vector_optional(g, p + "ln2.bias", d));
  VLKV_ASSIGN_OR_RETURN(l.ffn_up, bind_vit_matrix(g, p + "ffn_up.weight", d, hp.n_ff));
  VLKV_ASSIGN_OR_RETURN(l.ffn_up_b, bind_vit_vector_optional(g, p + "ffn_up.bias", hp.n_ff));
  if (g.find_tensor(p + "ffn_gate.weight")) {  // build_ffn gates when the tensor is there
    VLKV_ASSIGN_OR_RETURN(l.ffn_gate, bind_vit_matrix(g, p + "ffn_gate.weight", d, hp.n_ff));
    VLKV_ASSIGN_OR_RETURN(l.ffn_gate_b, bind_vit_vector_optional(g, p + "ffn_gate.bias", hp.n_ff));
  }
  VLKV_ASSIGN_OR_RETURN(l.ffn_down, bind_vit_matrix(g, p + "ffn_down.weight", hp.n_ff, d));
  VLKV_ASSIGN_OR_RETURN(l.ffn_down_b, bind_vit_vector_optional(g, p + "ffn_down.bias", d));
  return Status::ok();
}

Result<std::vector<VitLayer>> bind_vit_layers(const GgufFile& g, const VitHparams& hp) {
  std::vector<VitLayer> layers(static_cast<size_t>(hp.n_layers));
  const int64_t d = hp.n_embd;
  for (int64_t i = 0; i < hp.n_layers; ++i) {
    VitLayer& l = layers[static_cast<size_t>(i)];
    const std::string p = "v.blk." + std::to_string(i) + ".";
    VLKV_ASSIGN_OR_RETURN(l.ln1_w, bind_vit_vector(g, p + "ln1.weight", d));
    VLKV_ASSIGN_OR_RETURN(l.ln1_b, bind_vit_vector_optional(g, p + "ln1.bias", d));
    VLKV_ASSIGN_OR_RETURN(l.wq, bind_vit_matrix(g, p + "attn_q.weight", d, d));
    VLKV_ASSIGN_OR_RETURN(l.bq, bind_vit_vector_optional(g, p + "attn_q.bias", d));
    VLKV_ASSIGN_OR_RETURN(l.wk, bind_vit_matrix(g, p + "attn_k.weight", d, d));
    VLKV_ASSIGN_OR_RETURN(l.bk, bind_vit_vector_optional(g, p + "attn_k.bias", d));
    VLKV_ASSIGN_OR_RETURN(l.wv, bind_vit_matrix(g, p + "attn_v.weight", d, d));
    VLKV_ASSIGN_OR_RETURN(l.bv, bind_vit_vector_optional(g, p + "attn_v.bias", d));
    VLKV_RETURN_IF_ERROR(bind_vit_block_after_qkv(g, hp, p, l));
    VLKV_ASSIGN_OR_RETURN(l.ls1, bind_vit_vector_optional(g, p + "ls1.weight", d));
    VLKV_ASSIGN_OR_RETURN(l.ls2, bind_vit_vector_optional(g, p + "ls2.weight", d));
  }
  return layers;
}

void add_bias_rows(float* y, const std::vector<float>& bias, int64_t n, int64_t dim) {
  if (bias.empty()) return;
  for (int64_t t = 0; t < n; ++t) add_inplace(y + t * dim, bias.data(), dim);
}

void scale_rows(float* y, const std::vector<float>& scale, int64_t n, int64_t dim) {
  if (scale.empty()) return;
  for (int64_t t = 0; t < n; ++t) {
    float* row = y + t * dim;
    for (int64_t i = 0; i < dim; ++i) row[i] *= scale[static_cast<size_t>(i)];
  }
}

void vit_activation(VitFfnOp op, float* x, int64_t n) {
  switch (op) {
    case VitFfnOp::kGelu: gelu(x, n, x); break;
    case VitFfnOp::kGeluQuick: gelu_quick(x, n, x); break;
    case VitFfnOp::kSilu: {
      // x / (1 + exp(-x)) with the blocked attention's vectorized exp (exp_poly.h, relative
      // error < 2e-7; std::exp per element was ~1.5% of a Qwen2.5-VL encode).
      const GemmF32Kernels& kern = gemm_f32_kernels();
      constexpr int64_t kChunk = 256;
      float e[kChunk];
      for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
        const int64_t m = std::min(kChunk, n - i0);
        std::copy_n(x + i0, m, e);
        kern.exp_sum(e, m, -1.0f, 0.0f);
        for (int64_t i = 0; i < m; ++i) x[i0 + i] = x[i0 + i] / (1.0f + e[i]);
      }
      break;
    }
  }
}

void vit_attention(const float* q, const float* k, const float* v, int64_t n, int64_t n_heads, int64_t head_dim,
                   float scale, float* out, ThreadPool& pool) {
  attention_f32(q, k, v, n, n_heads, head_dim, scale, out, pool);
}

void vit_layer_norm_rows(const float* x, const std::vector<float>& w, const std::vector<float>& b, int64_t n,
                         int64_t dim, float eps, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    layer_norm(x + t * dim, w.empty() ? nullptr : w.data(), b.empty() ? nullptr : b.data(), dim, eps, out + t * dim);
  }
}

void vit_norm_rows(const VitHparams& hp, const float* x, const std::vector<float>& w, const std::vector<float>& b,
                   int64_t n, float* out) {
  const int64_t d = hp.n_embd;
  if (hp.norm == VitNorm::kLayerNorm) {
    vit_layer_norm_rows(x, w, b, n, d, hp.eps, out);
    return;
  }
  VLKV_CHECK(static_cast<int64_t>(w.size()) == d);
  for (int64_t t = 0; t < n; ++t) rms_norm(x + t * d, w.data(), d, hp.eps, out + t * d);
  add_bias_rows(out, b, n, d);
}

namespace {

// fn(begin, end) over row ranges of [0, n) on the pool's threads: the block's row-wise passes
// (norms, biases, activations, residual adds) cost ~10% of a 2-thread encode when run alone.
void for_rows(ThreadPool& pool, int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  pool.parallel_for(n, [&](int64_t b, int64_t e, int) { fn(b, e); }, /*min_per_thread=*/16);
}

// Matrices of one width times the same rows: one fused exact GEMM when every one takes the
// exact f32 path (ViT weights are F16/F32: matmul would run gemm_f32 on each), else matmul
// on each; the results are the same either way (gemm_f32_fused).
void matmuls_same_x(std::initializer_list<MatvecTarget> targets, const float* x, int64_t n, ThreadPool& pool) {
  bool exact = n > 1;
  for (const MatvecTarget& t : targets) exact = exact && !gemm_q8_applies(*t.w);
  if (exact) {
    gemm_f32_fused(std::span<const MatvecTarget>(targets.begin(), targets.size()), x, n, pool);
    return;
  }
  for (const MatvecTarget& t : targets) matmul(*t.w, x, n, t.y, pool);
}

}  // namespace

void vit_block(const VitHparams& hp, const VitLayer& l, float* x, int64_t n, const VitRope& rope, ThreadPool& pool,
               const std::vector<int64_t>* windows, VitScratch* scratch) {
  const int64_t d = hp.n_embd, n_ff = hp.n_ff;
  VitScratch local;
  VitScratch& sc = scratch ? *scratch : local;
  // Every element of each buffer is written before it is read (matmul outputs, norms).
  sc.xn.resize(n * d);                           // [n, n_embd] normalized
  sc.q.resize(n * d), sc.k.resize(n * d), sc.v.resize(n * d);  // [n, n_heads, head_dim]
  sc.attn.resize(n * d);                         // [n, n_heads, head_dim]
  sc.proj.resize(n * d);                         // [n, n_embd]
  sc.up.resize(n * n_ff);                        // [n, n_ff]
  std::vector<float>&xn = sc.xn, &q = sc.q, &k = sc.k, &v = sc.v, &attn = sc.attn, &proj = sc.proj, &up = sc.up;

  for_rows(pool, n, [&](int64_t b, int64_t e) { vit_norm_rows(hp, x + b * d, l.ln1_w, l.ln1_b, e - b, &xn[b * d]); });
  matmuls_same_x({{&l.wq, q.data()}, {&l.wk, k.data()}, {&l.wv, v.data()}}, xn.data(), n, pool);
  for_rows(pool, n, [&](int64_t b, int64_t e) {
    add_bias_rows(&q[b * d], l.bq, e - b, d);
    add_bias_rows(&k[b * d], l.bk, e - b, d);
    add_bias_rows(&v[b * d], l.bv, e - b, d);
  });
  if (rope) {
    rope(q.data(), n);
    rope(k.data(), n);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
  if (windows && !windows->empty()) {
    int64_t begin = 0;
    for (int64_t len : *windows) {
      VLKV_CHECK(len > 0 && begin + len <= n);
      vit_attention(&q[begin * d], &k[begin * d], &v[begin * d], len, hp.n_heads, hp.head_dim, scale,
                    &attn[begin * d], pool);
      begin += len;
    }
    VLKV_CHECK(begin == n);
  } else {
    vit_attention(q.data(), k.data(), v.data(), n, hp.n_heads, hp.head_dim, scale, attn.data(), pool);
  }
  matmul(l.wo, attn.data(), n, proj.data(), pool);
  // Residual and the second norm, row by row: x += ls1 * (proj + bo); xn = N2(x).
  for_rows(pool, n, [&](int64_t b, int64_t e) {
    add_bias_rows(&proj[b * d], l.bo, e - b, d);
    scale_rows(&proj[b * d], l.ls1, e - b, d);
    add_inplace(x + b * d, &proj[b * d], (e - b) * d);
    vit_norm_rows(hp, x + b * d, l.ln2_w, l.ln2_b, e - b, &xn[b * d]);
  });
  if (l.ffn_gate.n_rows > 0) {
    std::vector<float>& gate = sc.gate;  // [n, n_ff]
    gate.resize(n * n_ff);
    matmuls_same_x({{&l.ffn_up, up.data()}, {&l.ffn_gate, gate.data()}}, xn.data(), n, pool);
    for_rows(pool, n, [&](int64_t b, int64_t e) {
      add_bias_rows(&up[b * n_ff], l.ffn_up_b, e - b, n_ff);
      add_bias_rows(&gate[b * n_ff], l.ffn_gate_b, e - b, n_ff);
      vit_activation(hp.ffn_op, &gate[b * n_ff], (e - b) * n_ff);
      for (int64_t i = b * n_ff; i < e * n_ff; ++i) up[i] *= gate[i];
    });
  } else {
    matmul(l.ffn_up, xn.data(), n, up.data(), pool);
    for_rows(pool, n, [&](int64_t b, int64_t e) {
      add_bias_rows(&up[b * n_ff], l.ffn_up_b, e - b, n_ff);
      vit_activation(hp.ffn_op, &up[b * n_ff], (e - b) * n_ff);
    });
  }
  matmul(l.ffn_down, up.data(), n, proj.data(), pool);
  for_rows(pool, n, [&](int64_t b, int64_t e) {
    add_bias_rows(&proj[b * d], l.ffn_down_b, e - b, d);
    scale_rows(&proj[b * d], l.ls2, e - b, d);
    add_inplace(x + b * d, &proj[b * d], (e - b) * d);
  });
}

void vit_patch_embed(const ImageTensor& img, int64_t patch, const WeightMatrix& kernel, float* out, ThreadPool& pool) {
  VLKV_CHECK(img.width >= patch && img.height >= patch);
  VLKV_CHECK(kernel.n_cols == 3 * patch * patch);
  // Stride-patch convolution without padding: a right/bottom margin narrower than a patch is
  // not seen (ggml_conv_2d's output size, floor(side / patch)).
  const int64_t pw = img.width / patch, ph = img.height / patch;
  const int64_t n_patches = pw * ph;
  const int64_t plane = static_cast<int64_t>(img.width) * img.height;
  std::vector<float> cols(n_patches * kernel.n_cols);  // [n_patches, 3 * patch * patch] (c, ky, kx)
  for (int64_t py = 0; py < ph; ++py) {
    for (int64_t px = 0; px < pw; ++px) {
      float* dst = &cols[(py * pw + px) * kernel.n_cols];
      for (int64_t c = 0; c < 3; ++c) {
        for (int64_t ky = 0; ky < patch; ++ky) {
          const float* src = &img.data[c * plane + (py * patch + ky) * img.width + px * patch];
          std::memcpy(dst + (c * patch + ky) * patch, src, sizeof(float) * patch);
        }
      }
    }
  }
  matmul(kernel, cols.data(), n_patches, out, pool);
}

}  // namespace vlkv
