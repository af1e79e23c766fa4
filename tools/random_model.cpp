#include "random_model.h"

#include "random_tensor.h"
#include "weight_types.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "gguf/ggml_type_info.h"
#include "gguf/gguf_writer.h"

namespace vlkv {
namespace {

// SentencePiece token types (llama.cpp's llama_token_type).
constexpr int32_t kTokNormal = 1, kTokUnknown = 2, kTokControl = 3, kTokByte = 6;
const std::string kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's word boundary

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  void add(std::string piece, float score, int32_t type) {
    tokens.push_back(std::move(piece));
    scores.push_back(score);
    types.push_back(type);
  }
};

// <unk> <s> </s>, the 256 byte tokens, then synthetic pieces with descending scores:
// "▁", each printable ASCII char with and without "▁", then lowercase strings of
// length 2, 3, ... with and without "▁". Byte fallback makes every text tokenizable.
Vocab make_vocab(int64_t n_vocab) {
  Vocab v;
  v.add("<unk>", 0.0f, kTokUnknown);
  v.add("<s>", 0.0f, kTokControl);
  v.add("</s>", 0.0f, kTokControl);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    v.add(buf, 0.0f, kTokByte);
  }
  auto add_normal = [&](const std::string& piece) {
    if (static_cast<int64_t>(v.tokens.size()) < n_vocab) {
      v.add(piece, -static_cast<float>(v.tokens.size()), kTokNormal);
    }
  };
  add_normal(kSpace);
  for (char c = '!'; c <= '~'; ++c) {
    add_normal(kSpace + c);
    add_normal(std::string(1, c));
  }
  for (size_t len = 2; static_cast<int64_t>(v.tokens.size()) < n_vocab; ++len) {
    std::string s(len, 'a');
    while (static_cast<int64_t>(v.tokens.size()) < n_vocab) {
      add_normal(kSpace + s);
      add_normal(s);
      size_t i = len;  // next string in lexicographic order over a..z
      while (i > 0 && s[i - 1] == 'z') s[--i] = 'a';
      if (i == 0) break;
      ++s[i - 1];
    }
  }
  return v;
}

Status check_spec(const RandomModelSpec& s) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"n_embd", s.n_embd}, {"n_layers", s.n_layers}, {"n_heads", s.n_heads}, {"n_kv_heads", s.n_kv_heads},
      {"head_dim", s.head_dim}, {"n_ff", s.n_ff}, {"n_vocab", s.n_vocab}, {"context_length", s.context_length}};
  for (const auto& [what, v] : sizes) {
    if (v <= 0 || v > std::numeric_limits<int32_t>::max()) {
      return invalid_argument(std::string("random model: ") + what + " = " + std::to_string(v) + " is out of range");
    }
  }
  if (s.n_heads % s.n_kv_heads != 0) {
    return invalid_argument("random model: n_heads " + std::to_string(s.n_heads) + " is not a multiple of n_kv_heads " +
                            std::to_string(s.n_kv_heads));
  }
  if (s.n_vocab < 259) return invalid_argument("random model: n_vocab must be >= 259 (3 special + 256 byte tokens)");
  if (s.head_dim % 2 != 0) return invalid_argument("random model: head_dim must be even (RoPE rotates pairs)");
  if (s.arch != "llama" && s.arch != "qwen2" && s.arch != "qwen2vl" && s.arch != "qwen3vl" && s.arch != "gemma3")
    return invalid_argument("random model: architecture '" + s.arch +
                            "' is not one gen-model writes (llama, qwen2, qwen2vl, qwen3vl, gemma3)");
  if ((s.arch == "qwen2vl" || s.arch == "qwen3vl") && s.head_dim % 8 != 0)
    return invalid_argument("random model: " + s.arch + "'s M-RoPE sections need head_dim to be a multiple of 8");
  if (s.arch == "qwen3vl" && s.n_layers < 3)
    return invalid_argument("random model: qwen3vl needs at least 3 layers (3 deepstack layers)");
  const GgmlTypeInfo* info = ggml_type_info(s.weight_type);
  if (!info) return invalid_argument("random model: unknown weight type");
  if (s.k_m_mix && s.weight_type != GgmlType::kQ4_K && s.weight_type != GgmlType::kQ5_K)
    return invalid_argument("random model: the K_M mix is for Q4_K or Q5_K weights");
  for (int64_t row : {s.n_embd, s.n_heads * s.head_dim, s.n_ff}) {
    if (row % info->block_elems != 0) {
      return invalid_argument("random model: row length " + std::to_string(row) + " is not a multiple of the " +
                              info->name + " block size " + std::to_string(info->block_elems));
    }
  }
  return Status::ok();
}

}  // namespace

Status write_random_llama(const RandomModelSpec& spec, const std::string& path) {
  VLKV_RETURN_IF_ERROR(check_spec(spec));
  const auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  GgufWriter w;
  const std::string& a = spec.arch;
  w.set_string("general.architecture", a);
  w.set_string("general.type", "model");
  w.set_string("general.name", spec.name);
  w.set_u32(a + ".block_count", u32(spec.n_layers));
  w.set_u32(a + ".context_length", u32(spec.context_length));
  w.set_u32(a + ".embedding_length", u32(spec.n_embd));
  w.set_u32(a + ".feed_forward_length", u32(spec.n_ff));
  w.set_u32(a + ".attention.head_count", u32(spec.n_heads));
  w.set_u32(a + ".attention.head_count_kv", u32(spec.n_kv_heads));
  w.set_f32(a + ".rope.freq_base", spec.rope_freq_base);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", spec.rms_eps);
  if (spec.head_dim * spec.n_heads != spec.n_embd) {
    w.set_u32(a + ".attention.key_length", u32(spec.head_dim));
    w.set_u32(a + ".attention.value_length", u32(spec.head_dim));
  }
  w.set_u32(a + ".vocab_size", u32(spec.n_vocab));
  w.set_u32(a + ".rope.dimension_count", u32(spec.head_dim));
  if (a == "qwen2vl") {
    const int32_t t = static_cast<int32_t>(spec.head_dim / 8), hw = static_cast<int32_t>((spec.head_dim / 2 - t) / 2);
    const int32_t sections[4] = {t, hw, hw, 0};
    w.set(a + ".rope.dimension_sections", gguf_i32_array(sections));
  }
  if (a == "qwen3vl") {  // Qwen3-VL: mrope_section [24, 20, 20] at head_dim 128
    const int32_t t = static_cast<int32_t>(spec.head_dim * 3 / 16), hw = static_cast<int32_t>((spec.head_dim / 2 - t) / 2);
    const int32_t sections[4] = {t, hw, hw, 0};
    w.set(a + ".rope.dimension_sections", gguf_i32_array(sections));
    w.set_u32(a + ".n_deepstack_layers", 3);
  }
  if (a == "gemma3") {
    w.set_u32(a + ".attention.sliding_window", 1024);
    w.set_f32(a + ".rope.freq_base_swa", 10000.0f);
  }
  const int64_t ftype = llama_file_type(WeightTypeChoice{spec.weight_type, spec.k_m_mix});
  if (ftype >= 0) w.set_u32("general.file_type", u32(ftype));
  const GgmlTypeInfo* info = ggml_type_info(spec.weight_type);
  if (info->block_elems > 1) w.set_u32("general.quantization_version", 2);

  const Vocab vocab = make_vocab(spec.n_vocab);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens", gguf_string_array(vocab.tokens));
  w.set("tokenizer.ggml.scores", gguf_f32_array(vocab.scores));
  w.set("tokenizer.ggml.token_type", gguf_i32_array(vocab.types));
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  w.set_bool("tokenizer.ggml.add_space_prefix", true);

  // Tensors in llama.cpp's order and dims (ggml order: dims[0] is the input/row length).
  const GgmlType wt = spec.weight_type;
  const GgmlType f32 = GgmlType::kF32;
  const int64_t d = spec.n_embd, q = spec.n_heads * spec.head_dim, kv = spec.n_kv_heads * spec.head_dim;
  const uint64_t seed = spec.seed;
  VLKV_RETURN_IF_ERROR(add_random(w, "token_embd.weight", wt, {d, spec.n_vocab}, Init::kEmbedding, seed));
  VLKV_RETURN_IF_ERROR(add_random(w, "output_norm.weight", f32, {d}, Init::kNorm, seed));
  // The K_M mix's Q6_K tensors (RandomModelSpec::k_m_mix).
  const int64_t nl = spec.n_layers;
  const auto more_bits = [&](int64_t l) { return k_m_more_bits(l, nl); };
  const GgmlType q6 = spec.k_m_mix ? GgmlType::kQ6_K : wt;
  if (!spec.tied_output && spec.arch != "gemma3") {  // Gemma 3 ties its output to token_embd
    VLKV_RETURN_IF_ERROR(add_random(w, "output.weight", q6, {d, spec.n_vocab}, Init::kLinear, seed));
  }
  for (int64_t l = 0; l < spec.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    VLKV_RETURN_IF_ERROR(add_random(w, p + "attn_norm.weight", f32, {d}, Init::kNorm, seed));
    VLKV_RETURN_IF_ERROR(add_random(w, p + "attn_q.weight", wt, {d, q}, Init::kLinear, seed));
    VLKV_RETURN_IF_ERROR(add_random(w, p + "attn_k.weight", wt, {d, kv}, Init::kLinear, seed));
    const GgmlType wt_more = more_bits(l) ? q6 : wt;
    VLKV_RETURN_IF_ERROR(add_random(w, p + "attn_v.weight", wt_more, {d, kv}, Init::kLinear, seed));
    const bool qk_norm = spec.arch == "qwen3vl" || spec.arch == "gemma3";
    if (qk_norm) {
      VLKV_RETURN_IF_ERROR(add_random(w, p + "attn_q_norm.weight", f32, {spec.head_dim}, Init::kNorm, seed));
      VLKV_RETURN_IF_ERROR(add_random(w, p + "attn_k_norm.weight", f32, {spec.head_dim}, Init::kNorm, seed));
    }
    if (spec.arch == "gemma3") {
      VLKV_RETURN_IF_ERROR(add_random(w, p + "post_attention_norm.weight", f32, {d}, Init::kNorm, seed));
      VLKV_RETURN_IF_ERROR(add_random(w, p + "post_ffw_norm.weight", f32, {d}, Init::kNorm, seed));
    }
    if (spec.arch == "qwen2" || spec.arch == "qwen2vl") {  // biases on q, k, v
      VLKV_RETURN_IF_ERROR(add_random(w, p + "attn_q.bias", f32, {q}, Init::kBias, seed));
      VLKV_RETURN_IF_ERROR(add_random(w, p + "attn_k.bias", f32, {kv}, Init::kBias, seed));
      VLKV_RETURN_IF_ERROR(add_random(w, p + "attn_v.bias", f32, {kv}, Init::kBias, seed));
    }
    VLKV_RETURN_IF_ERROR(add_random(w, p + "attn_output.weight", wt, {q, d}, Init::kLinear, seed));
    VLKV_RETURN_IF_ERROR(add_random(w, p + "ffn_norm.weight", f32, {d}, Init::kNorm, seed));
    VLKV_RETURN_IF_ERROR(add_random(w, p + "ffn_gate.weight", wt, {d, spec.n_ff}, Init::kLinear, seed));
    VLKV_RETURN_IF_ERROR(add_random(w, p + "ffn_up.weight", wt, {d, spec.n_ff}, Init::kLinear, seed));
    VLKV_RETURN_IF_ERROR(add_random(w, p + "ffn_down.weight", wt_more, {spec.n_ff, d}, Init::kLinear, seed));
  }
  return w.write_to_file(path);
}

}  // namespace vlkv
