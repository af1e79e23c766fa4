// Gemma 3 hyperparameters, as llama.cpp's gemma3 loader reads them (src/models/gemma3.cpp
// at 3f545be): sliding-window layers every layer but each sliding_window_pattern-th
// (default 6), their own RoPE base (rope.freq_base_swa, default 1e4) without the file's
// rope scaling, token embeddings scaled by sqrt(n_embd), attention scale 1/sqrt(head_dim)
// (1/sqrt(n_embd/n_heads) for the 62-layer 27B). Keys that change the computation and
// vlkv does not implement are refused by name (docs/refused_keys_gemma3.md).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "text/hparams.h"

namespace vlkv {
namespace {

// A float key that must be absent or zero.
Status refuse_if_nonzero(const GgufFile& gguf, const std::string& key, const std::string& what) {
  Result<double> v = gguf.get_f64(key);
  if (!v.is_ok()) return v.status().code() == StatusCode::kNotFound ? Status::ok() : v.status();
  if (*v == 0.0) return Status::ok();
  return unsupported("'" + key + "' = " + std::to_string(*v) + ": " + what + " is not implemented by vlkv");
}

}  // namespace

Status read_gemma3_hparams(const GgufFile& gguf, TextHparams& hp) {
  const std::string& a = hp.arch_name;
  hp.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));
  hp.qk_norm = true;
  hp.post_norms = true;
  hp.ffn_geglu = true;
  hp.media_non_causal = true;
  // llama.cpp: LLM_TYPE_27B (62 layers) scales by the model width per head, the others by head_dim.
  if (hp.n_layers == 62) hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(hp.n_embd / hp.n_heads));

  VLKV_RETURN_IF_ERROR(refuse_if_nonzero(gguf, a + ".final_logit_softcapping", "final-logit soft-capping"));
  VLKV_RETURN_IF_ERROR(refuse_if_nonzero(gguf, a + ".attn_logit_softcapping", "attention-logit soft-capping"));
  for (const char* t : {"dense_2.weight", "dense_3.weight"}) {  // EmbeddingGemma's output projections
    if (gguf.find_tensor(t)) return unsupported(std::string("tensor '") + t + "' (EmbeddingGemma) is not supported");
  }

  Result<int64_t> window = gguf.get_i64(a + ".attention.sliding_window");
  if (!window.is_ok()) {
    if (window.status().code() != StatusCode::kNotFound) return window.status();
    return Status::ok();  // llama.cpp: no key, no sliding layers
  }
  if (*window < 0 || *window > (int64_t{1} << 30)) return invalid_file(a + ".attention.sliding_window out of range");
  if (*window == 0) return Status::ok();
  hp.sliding_window = *window;

  const std::string pattern_key = a + ".attention.sliding_window_pattern";
  int64_t period = 6;  // llama.cpp's default: 5 sliding layers, then a global one
  if (gguf.find(pattern_key)) {
    Result<int64_t> p = gguf.get_i64(pattern_key);
    if (!p.is_ok()) {
      return unsupported("'" + pattern_key + "' is not an integer (a per-layer array is not supported)");
    }
    if (*p < 0 || *p > hp.n_layers + 1) return invalid_file("'" + pattern_key + "' out of range");
    period = *p;
  }
  // llama_hparams::set_swa_pattern (dense last): layer il slides unless il % period == period - 1;
  // period 0 makes every layer slide.
  hp.layer_sliding.assign(static_cast<size_t>(hp.n_layers), 0);
  for (int64_t il = 0; il < hp.n_layers; ++il)
    hp.layer_sliding[static_cast<size_t>(il)] = period == 0 || il % period < period - 1;

  hp.rope_swa = hp.rope;
  hp.rope_swa.freq_scale = 1.0f;  // llama.cpp's rope_freq_scale_train_swa: the file's scaling is global-only
  hp.rope_swa.freq_base = 10000.0f;
  Result<double> base = gguf.get_f64(a + ".rope.freq_base_swa");
  if (base.is_ok()) {
    if (!std::isfinite(*base) || !(*base > 1)) return invalid_file(a + ".rope.freq_base_swa must be > 1");
    hp.rope_swa.freq_base = static_cast<float>(*base);
  } else if (base.status().code() != StatusCode::kNotFound) {
    return base.status();
  }
  return Status::ok();
}

std::vector<int32_t> kv_layer_windows(const TextHparams& hp) {
  std::vector<int32_t> out;
  if (hp.sliding_window <= 0) return out;
  const int32_t w = static_cast<int32_t>(std::min<int64_t>(hp.sliding_window, INT32_MAX));
  for (int64_t il = 0; il < hp.n_layers; ++il) out.push_back(hp.is_sliding(il) ? w : 0);
  return out;
}

}  // namespace vlkv
