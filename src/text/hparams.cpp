#include "text/hparams.h"

#include <cmath>

namespace vlkv {
namespace {

// Upper bounds far above any real model; they stop absurd values from driving
// allocations (n_embd * n_ctx buffers) before tensor shapes are checked.
constexpr int64_t kMaxDim = 1 << 20;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxHeads = 4096;

Result<int64_t> read_dim(const GgufFile& gguf, const std::string& key, int64_t max, bool required,
                         int64_t fallback) {
  Result<int64_t> v = gguf.get_i64(key);
  if (!v.is_ok()) {
    if (!required && v.status().code() == StatusCode::kNotFound) return fallback;
    if (v.status().code() == StatusCode::kNotFound) return invalid_file("missing metadata key '" + key + "'");
    return v.status();
  }
  if (*v <= 0 || *v > max) {
    return invalid_file("metadata '" + key + "' = " + std::to_string(*v) + " is out of range [1, " +
                        std::to_string(max) + "]");
  }
  return *v;
}

Result<double> read_float(const GgufFile& gguf, const std::string& key, double fallback) {
  Result<double> v = gguf.get_f64(key);
  if (!v.is_ok()) {
    if (v.status().code() == StatusCode::kNotFound) return fallback;
    return v.status();
  }
  if (!std::isfinite(*v)) return invalid_file("metadata '" + key + "' is not finite");
  return *v;
}

}  // namespace

Result<TextHparams> read_text_hparams(const GgufFile& gguf) {
  TextHparams hp;
  VLKV_ASSIGN_OR_RETURN(hp.arch_name, gguf.get_string("general.architecture"));
  const std::string& a = hp.arch_name;
  if (a == "llama") {
    hp.arch = TextArch::kLlama;
    hp.rope.style = RopeStyle::kNormal;
  } else if (a == "qwen2") {
    hp.arch = TextArch::kQwen2;
    hp.rope.style = RopeStyle::kNeox;
    hp.qkv_bias = true;
  } else if (a == "qwen2vl") {
    hp.arch = TextArch::kQwen2Vl;
    hp.rope.style = RopeStyle::kNeox;
    hp.qkv_bias = true;
  } else if (a == "qwen3vl") {
    hp.arch = TextArch::kQwen3Vl;
    hp.rope.style = RopeStyle::kNeox;
    hp.rope_interleaved = true;
    hp.qk_norm = true;
  } else if (a == "gemma3") {
    hp.arch = TextArch::kGemma3;
    hp.rope.style = RopeStyle::kNeox;
  } else {
    return unsupported("architecture '" + a + "' is not supported (supported: llama, qwen2, qwen2vl, qwen3vl, gemma3)");
  }

  VLKV_ASSIGN_OR_RETURN(hp.n_embd, read_dim(gguf, a + ".embedding_length", kMaxDim, true, 0));
  VLKV_ASSIGN_OR_RETURN(hp.n_layers, read_dim(gguf, a + ".block_count", kMaxLayers, true, 0));
  VLKV_ASSIGN_OR_RETURN(hp.n_ff, read_dim(gguf, a + ".feed_forward_length", kMaxDim, true, 0));
  VLKV_ASSIGN_OR_RETURN(hp.n_heads, read_dim(gguf, a + ".attention.head_count", kMaxHeads, true, 0));
  VLKV_ASSIGN_OR_RETURN(hp.n_kv_heads,
                        read_dim(gguf, a + ".attention.head_count_kv", kMaxHeads, false, hp.n_heads));
  VLKV_ASSIGN_OR_RETURN(hp.n_ctx_train, read_dim(gguf, a + ".context_length", 1ll << 30, false, 4096));
  if (hp.n_embd % hp.n_heads != 0 && !gguf.find(a + ".attention.key_length")) {
    return invalid_file("embedding_length " + std::to_string(hp.n_embd) + " is not a multiple of head_count " +
                        std::to_string(hp.n_heads));
  }
  VLKV_ASSIGN_OR_RETURN(hp.head_dim,
                        read_dim(gguf, a + ".attention.key_length", kMaxDim, false, hp.n_embd / hp.n_heads));
  VLKV_ASSIGN_OR_RETURN(int64_t value_len, read_dim(gguf, a + ".attention.value_length", kMaxDim, false, hp.head_dim));
  if (value_len != hp.head_dim) {
    return unsupported("attention.value_length " + std::to_string(value_len) + " != key_length " +
                       std::to_string(hp.head_dim));
  }
  if (hp.n_heads % hp.n_kv_heads != 0) {
    return invalid_file("head_count " + std::to_string(hp.n_heads) + " is not a multiple of head_count_kv " +
                        std::to_string(hp.n_kv_heads));
  }
  if (hp.head_dim % 2 != 0) return invalid_file("head dimension " + std::to_string(hp.head_dim) + " is odd");

  VLKV_ASSIGN_OR_RETURN(double eps, read_float(gguf, a + ".attention.layer_norm_rms_epsilon", 1e-5));
  if (!(eps > 0 && eps < 1)) return invalid_file("layer_norm_rms_epsilon out of range");
  hp.rms_eps = static_cast<float>(eps);

  VLKV_ASSIGN_OR_RETURN(double base, read_float(gguf, a + ".rope.freq_base", 10000.0));
  if (!(base > 1)) return invalid_file("rope.freq_base must be > 1");
  hp.rope.freq_base = static_cast<float>(base);
  VLKV_ASSIGN_OR_RETURN(int64_t n_rot, read_dim(gguf, a + ".rope.dimension_count", kMaxDim, false, hp.head_dim));
  if (n_rot > hp.head_dim || n_rot % 2 != 0) {
    return invalid_file("rope.dimension_count " + std::to_string(n_rot) + " is odd or exceeds the head dimension");
  }
  hp.rope.n_rot = static_cast<int>(n_rot);

  // Linear RoPE scaling: {arch}.rope.scaling.type == "linear" with factor f → freq_scale = 1/f.
  // Older files store {arch}.rope.scale_linear directly.
  hp.rope.freq_scale = 1.0f;
  Result<std::string> scaling_type = gguf.get_string(a + ".rope.scaling.type");
  if (scaling_type.is_ok() && *scaling_type != "none") {
    if (*scaling_type != "linear") {
      return unsupported("rope scaling type '" + *scaling_type + "' is not supported (only linear)");
    }
    VLKV_ASSIGN_OR_RETURN(double factor, read_float(gguf, a + ".rope.scaling.factor", 1.0));
    if (!(factor > 0)) return invalid_file("rope.scaling.factor must be > 0");
    hp.rope.freq_scale = static_cast<float>(1.0 / factor);
  } else {
    VLKV_ASSIGN_OR_RETURN(double linear, read_float(gguf, a + ".rope.scale_linear", 1.0));
    if (!(linear > 0)) return invalid_file("rope.scale_linear must be > 0");
    hp.rope.freq_scale = static_cast<float>(1.0 / linear);
  }
  if (hp.uses_mrope()) {
    Result<std::vector<int64_t>> sections = gguf.get_i64_array(a + ".rope.dimension_sections");
    if (!sections.is_ok()) return invalid_file(a + " model without rope.dimension_sections");
    if (sections->size() > 4) return invalid_file("rope.dimension_sections has more than 4 entries");
    int64_t total = 0;
    for (size_t i = 0; i < sections->size(); ++i) {
      if ((*sections)[i] < 0 || (*sections)[i] > hp.head_dim) return invalid_file("rope.dimension_sections out of range");
      hp.rope_sections[i] = static_cast<int>((*sections)[i]);
      total += (*sections)[i];
    }
    if (total == 0) return invalid_file("rope.dimension_sections are all zero");
    if (total * 2 > hp.rope.n_rot) {
      return invalid_file("rope.dimension_sections cover " + std::to_string(total * 2) + " dims, more than the " +
                          std::to_string(hp.rope.n_rot) + " rotated");
    }
  }
  if (hp.arch == TextArch::kQwen3Vl) {
    // llama.cpp asserts n_rot == head_dim for qwen3vl; a partial rotation is not its model.
    if (hp.rope.n_rot != hp.head_dim) return unsupported("qwen3vl: rope.dimension_count != head dimension");
    Result<int64_t> ds = gguf.get_i64(a + ".n_deepstack_layers");
    if (ds.is_ok()) {
      if (*ds < 0 || *ds > hp.n_layers) {
        return invalid_file("n_deepstack_layers " + std::to_string(*ds) + " is outside [0, block_count " +
                            std::to_string(hp.n_layers) + "]");
      }
      hp.n_deepstack_layers = *ds;
    } else if (ds.status().code() != StatusCode::kNotFound) {
      return ds.status();
    }
  }
  hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim));

  const GgufTensorInfo* embd = gguf.find_tensor("token_embd.weight");
  if (!embd) return invalid_file("missing tensor 'token_embd.weight'");
  if (embd->dims.size() != 2 || embd->dims[0] != hp.n_embd) {
    return invalid_file("tensor 'token_embd.weight' must have dims {" + std::to_string(hp.n_embd) + ", n_vocab}");
  }
  hp.n_vocab = embd->dims[1];
  hp.tied_output = gguf.find_tensor("output.weight") == nullptr;
  if (hp.arch == TextArch::kGemma3) VLKV_RETURN_IF_ERROR(read_gemma3_hparams(gguf, hp));
  return hp;
}

}  // namespace vlkv
