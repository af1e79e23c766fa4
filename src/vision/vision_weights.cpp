#include "vision/vision_weights.h"

#include "gguf/ggml_type_info.h"
#include "quant/weight_format.h"

namespace vlkv {
namespace {

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "{";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "}";
}

constexpr int64_t kMaxDim = 1 << 20;  // no ViT has a side, width or layer count beyond this

Result<int64_t> read_size(const GgufFile& g, const std::string& key, bool required, int64_t fallback) {
  Result<int64_t> v = g.get_i64(key);
  if (!v.is_ok()) {
    if (!required && v.status().code() == StatusCode::kNotFound) return fallback;
    return v.status().code() == StatusCode::kNotFound ? invalid_file("missing key " + key) : v.status();
  }
  if (*v <= 0 || *v > kMaxDim) return invalid_file(key + " = " + std::to_string(*v) + " is out of range");
  return *v;
}

}  // namespace

Result<ClipVisionHparams> read_clip_vision_hparams(const GgufFile& g) {
  ClipVisionHparams h;
  Result<std::string> type = g.get_string("clip.projector_type");
  h.projector_type = type.is_ok() ? *type : "mlp";
  VLKV_ASSIGN_OR_RETURN(h.image_size, read_size(g, "clip.vision.image_size", true, 0));
  VLKV_ASSIGN_OR_RETURN(h.patch_size, read_size(g, "clip.vision.patch_size", true, 0));
  VLKV_ASSIGN_OR_RETURN(h.n_embd, read_size(g, "clip.vision.embedding_length", true, 0));
  VLKV_ASSIGN_OR_RETURN(h.n_ff, read_size(g, "clip.vision.feed_forward_length", true, 0));
  VLKV_ASSIGN_OR_RETURN(h.n_layers, read_size(g, "clip.vision.block_count", true, 0));
  VLKV_ASSIGN_OR_RETURN(h.n_heads, read_size(g, "clip.vision.attention.head_count", true, 0));
  Result<int64_t> proj = g.get_i64("clip.vision.projection_dim");
  h.projection_dim = proj.is_ok() ? *proj : 0;
  if (h.n_embd % h.n_heads != 0) return invalid_file("clip.vision.embedding_length is not a multiple of head_count");
  h.head_dim = h.n_embd / h.n_heads;
  if (h.image_size % h.patch_size != 0) return invalid_file("clip.vision.image_size is not a multiple of patch_size");
  Result<double> eps = g.get_f64("clip.vision.attention.layer_norm_epsilon");
  if (eps.is_ok()) {
    if (!(*eps > 0 && *eps < 1)) return invalid_file("clip.vision.attention.layer_norm_epsilon is out of range");
    h.eps = static_cast<float>(*eps);
  }
  for (const char* key : {"clip.vision.image_mean", "clip.vision.image_std"}) {
    Result<std::vector<double>> v = g.get_f64_array(key);
    if (!v.is_ok()) {
      if (v.status().code() == StatusCode::kNotFound) continue;
      return v.status();
    }
    if (v->size() != 3) return invalid_file(std::string(key) + " must have 3 values");
    const bool is_std = std::string(key) == "clip.vision.image_std";
    for (int c = 0; c < 3; ++c) {
      const double x = (*v)[static_cast<size_t>(c)];
      if (!(x > -10 && x < 10) || (is_std && !(x > 1e-6))) return invalid_file(std::string(key) + " is out of range");
      (is_std ? h.image_std : h.image_mean)[c] = static_cast<float>(x);
    }
  }
  Result<bool> gelu = g.get_bool("clip.use_gelu");
  h.use_gelu = gelu.is_ok() && *gelu;
  Result<bool> silu = g.get_bool("clip.use_silu");
  h.use_silu = silu.is_ok() && *silu;
  Result<std::vector<int64_t>> fl = g.get_i64_array("clip.vision.feature_layer");
  if (fl.is_ok()) {
    for (int64_t l : *fl) {
      if (l < 0 || l > h.n_layers) return invalid_file("clip.vision.feature_layer holds layer " + std::to_string(l));
    }
    h.feature_layers = *fl;
  } else if (fl.status().code() != StatusCode::kNotFound) {
    return fl.status();
  }
  return h;
}

Result<WeightMatrix> bind_vision_matrix(const GgufFile& gguf, const std::string& name, int64_t n_cols,
                                        int64_t n_rows) {
  const GgufTensorInfo* t = gguf.find_tensor(name);
  if (!t) return invalid_file("missing tensor '" + name + "'");
  if (t->dims.size() != 2 || t->dims[0] != n_cols || t->dims[1] != n_rows) {
    return invalid_file("tensor '" + name + "' has dims " + dims_str(t->dims) + ", expected " +
                        dims_str({n_cols, n_rows}));
  }
  if (!find_weight_format(t->type)) {
    return unsupported("tensor '" + name + "' has weight type " + ggml_type_name(t->type) +
                       ", which vlkv does not implement");
  }
  VLKV_ASSIGN_OR_RETURN(size_t rb, row_bytes(t->type, n_cols));
  if (rb * static_cast<uint64_t>(n_rows) != t->n_bytes) {
    return invalid_file("tensor '" + name + "' byte size does not match its shape");
  }
  return WeightMatrix{t->type, t->data, n_rows, n_cols, rb};
}

Result<std::vector<float>> read_vision_tensor(const GgufFile& gguf, const std::string& name,
                                              const std::vector<int64_t>& dims) {
  const GgufTensorInfo* t = gguf.find_tensor(name);
  if (!t) return invalid_file("missing tensor '" + name + "'");
  if (t->dims != dims) {
    return invalid_file("tensor '" + name + "' has dims " + dims_str(t->dims) + ", expected " + dims_str(dims));
  }
  const WeightFormat* f = find_weight_format(t->type);
  const int64_t row = dims[0];
  if (!f || row % f->block_elems != 0) {
    return unsupported("tensor '" + name + "' has unsupported type " + ggml_type_name(t->type));
  }
  VLKV_ASSIGN_OR_RETURN(size_t rb, row_bytes(t->type, row));
  const int64_t n_rows = t->n_elements() / row;
  if (rb * static_cast<uint64_t>(n_rows) != t->n_bytes) {
    return invalid_file("tensor '" + name + "' byte size does not match its shape");
  }
  std::vector<float> out(static_cast<size_t>(t->n_elements()));
  for (int64_t r = 0; r < n_rows; ++r) f->dequantize_row_ref(t->data + r * rb, out.data() + r * row, row);
  return out;
}

Result<std::vector<float>> read_optional_vision_tensor(const GgufFile& gguf, const std::string& name,
                                                       const std::vector<int64_t>& dims) {
  if (!gguf.find_tensor(name)) return std::vector<float>{};
  return read_vision_tensor(gguf, name, dims);
}

}  // namespace vlkv
