// write_random_llama: the file opens with GgufFile and has llama.cpp's keys, names and dims.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <set>

#include "gguf/gguf_reader.h"
#include "quant/weight_format.h"
#include "text/hparams.h"
#include "text/text_weights.h"

#include "random_model.h"

namespace vlkv {
namespace {

std::string temp_path(const char* name) { return (std::filesystem::temp_directory_path() / name).string(); }

RandomModelSpec tiny(GgmlType type) {
  RandomModelSpec s;
  s.n_embd = 64;
  s.n_layers = 2;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 32;  // != n_embd / n_heads: key_length/value_length are written
  s.n_ff = 96;
  s.n_vocab = 1000;
  s.context_length = 256;
  s.weight_type = type;
  s.seed = 7;
  return s;
}

std::vector<char> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The K_M mix as llama.cpp's quantize writes Q4_K_M: Q6_K output, and attn_v and ffn_down on
// use_more_bits layers (16 layers: 0, 1, 4, 7, 10, 13, 14, 15), Q4_K elsewhere; file type 15.
TEST(RandomModel, Q4KMMixHasLlamaCppsQ6KTensors) {
  const std::string path = temp_path("vlkv_random_llama_q4_k_m.gguf");
  RandomModelSpec spec = tiny(GgmlType::kQ4_K);
  spec.n_embd = 256;
  spec.head_dim = 64;
  spec.n_ff = 256;
  spec.n_layers = 16;
  spec.k_m_mix = true;
  ASSERT_TRUE(write_random_llama(spec, path).is_ok());
  {
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    const GgufFile& g = **f;
    EXPECT_EQ(g.get_u64("general.file_type").value(), 15u);
    EXPECT_EQ(g.find_tensor("output.weight")->type, GgmlType::kQ6_K);
    EXPECT_EQ(g.find_tensor("token_embd.weight")->type, GgmlType::kQ4_K);
    const std::set<int> more_bits = {0, 1, 4, 7, 10, 13, 14, 15};
    for (int l = 0; l < 16; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      const GgmlType want = more_bits.count(l) ? GgmlType::kQ6_K : GgmlType::kQ4_K;
      EXPECT_EQ(g.find_tensor(p + "attn_v.weight")->type, want) << l;
      EXPECT_EQ(g.find_tensor(p + "ffn_down.weight")->type, want) << l;
      EXPECT_EQ(g.find_tensor(p + "attn_q.weight")->type, GgmlType::kQ4_K) << l;
      EXPECT_EQ(g.find_tensor(p + "ffn_up.weight")->type, GgmlType::kQ4_K) << l;
    }
  }
  std::filesystem::remove(path);
  spec.weight_type = GgmlType::kQ8_0;  // the mix is for Q4_K / Q5_K only
  const Status st = write_random_llama(spec, path);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("K_M mix"), std::string::npos) << st.message();
}

TEST(RandomModel, TinyF32ModelReadsBack) {
  const std::string path = temp_path("vlkv_random_llama_f32.gguf");
  const RandomModelSpec spec = tiny(GgmlType::kF32);
  ASSERT_TRUE(write_random_llama(spec, path).is_ok());
  {
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    const GgufFile& g = **f;
    EXPECT_EQ(g.get_string("general.architecture").value(), "llama");
    EXPECT_EQ(g.get_u64("llama.embedding_length").value(), 64u);
    EXPECT_EQ(g.get_u64("llama.block_count").value(), 2u);
    EXPECT_EQ(g.get_u64("llama.attention.head_count").value(), 4u);
    EXPECT_EQ(g.get_u64("llama.attention.head_count_kv").value(), 2u);
    EXPECT_EQ(g.get_u64("llama.attention.key_length").value(), 32u);
    EXPECT_EQ(g.get_u64("llama.rope.dimension_count").value(), 32u);
    EXPECT_EQ(g.get_u64("llama.feed_forward_length").value(), 96u);
    EXPECT_EQ(g.get_u64("llama.context_length").value(), 256u);
    EXPECT_EQ(g.get_u64("llama.vocab_size").value(), 1000u);
    EXPECT_EQ(g.get_u64("general.file_type").value(), 0u);
    EXPECT_NEAR(g.get_f64("llama.attention.layer_norm_rms_epsilon").value(), 1e-5, 1e-12);
    EXPECT_EQ(g.get_f64("llama.rope.freq_base").value(), 10000.0);
    EXPECT_EQ(g.get_string("tokenizer.ggml.model").value(), "llama");
    EXPECT_TRUE(g.get_bool("tokenizer.ggml.add_bos_token").value());

    const auto tokens = g.get_string_array("tokenizer.ggml.tokens").value();
    const auto scores = g.get_f64_array("tokenizer.ggml.scores").value();
    const auto types = g.get_i64_array("tokenizer.ggml.token_type").value();
    ASSERT_EQ(tokens.size(), 1000u);
    ASSERT_EQ(scores.size(), 1000u);
    ASSERT_EQ(types.size(), 1000u);
    EXPECT_EQ(tokens[0], "<unk>");
    EXPECT_EQ(tokens[1], "<s>");
    EXPECT_EQ(tokens[2], "</s>");
    EXPECT_EQ(tokens[3], "<0x00>");
    EXPECT_EQ(tokens[3 + 0x0A], "<0x0A>");
    EXPECT_EQ(tokens[258], "<0xFF>");
    EXPECT_EQ(types[0], 2);
    EXPECT_EQ(types[1], 3);
    EXPECT_EQ(types[100], 6);
    EXPECT_EQ(types[259], 1);
    EXPECT_EQ(tokens[259], "\xe2\x96\x81");
    std::set<std::string> unique(tokens.begin(), tokens.end());
    EXPECT_EQ(unique.size(), tokens.size());
    for (size_t i = 260; i < scores.size(); ++i) EXPECT_LT(scores[i], scores[i - 1]);

    EXPECT_EQ(g.tensors().size(), 3u + 2u * 9u);
    const std::pair<const char*, std::vector<int64_t>> dims[] = {
        {"token_embd.weight", {64, 1000}},      {"output.weight", {64, 1000}},
        {"output_norm.weight", {64}},           {"blk.1.attn_norm.weight", {64}},
        {"blk.1.attn_q.weight", {64, 128}},     {"blk.1.attn_k.weight", {64, 64}},
        {"blk.1.attn_v.weight", {64, 64}},      {"blk.1.attn_output.weight", {128, 64}},
        {"blk.0.ffn_norm.weight", {64}},        {"blk.0.ffn_gate.weight", {64, 96}},
        {"blk.0.ffn_up.weight", {64, 96}},      {"blk.0.ffn_down.weight", {96, 64}}};
    for (const auto& [name, want] : dims) {
      const GgufTensorInfo* t = g.find_tensor(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(t->dims, want) << name;
      EXPECT_EQ(t->type, GgmlType::kF32) << name;
    }
    // Statistics of the draws: embeddings have variance 0.5, norms are near 1,
    // linear weights have variance 1/fan_in.
    auto moments = [](const GgufTensorInfo* t) {
      const float* x = reinterpret_cast<const float*>(t->data);
      double s = 0, s2 = 0;
      for (int64_t i = 0; i < t->n_elements(); ++i) { s += x[i]; s2 += double(x[i]) * x[i]; }
      const double n = double(t->n_elements());
      return std::pair<double, double>{s / n, s2 / n - (s / n) * (s / n)};
    };
    auto [emb_mean, emb_var] = moments(g.find_tensor("token_embd.weight"));
    EXPECT_NEAR(emb_mean, 0.0, 0.02);
    EXPECT_NEAR(emb_var, 0.5, 0.02);
    auto [norm_mean, norm_var] = moments(g.find_tensor("blk.0.attn_norm.weight"));
    EXPECT_NEAR(norm_mean, 1.0, 0.05);
    auto [down_mean, down_var] = moments(g.find_tensor("blk.0.ffn_down.weight"));
    EXPECT_NEAR(down_var, 1.0 / 96, 0.002);
    (void)norm_var; (void)down_mean;
    EXPECT_NE(std::memcmp(g.find_tensor("blk.0.attn_q.weight")->data, g.find_tensor("blk.1.attn_q.weight")->data, 64),
              0);
  }
  // Same spec, same bytes.
  const std::string again = temp_path("vlkv_random_llama_f32_again.gguf");
  ASSERT_TRUE(write_random_llama(spec, again).is_ok());
  EXPECT_EQ(slurp(path), slurp(again));
  std::filesystem::remove(path);
  std::filesystem::remove(again);
}

TEST(RandomModel, TiedOutputHasNoOutputTensor) {
  const std::string path = temp_path("vlkv_random_llama_tied.gguf");
  RandomModelSpec spec = tiny(GgmlType::kF16);
  spec.tied_output = true;
  spec.head_dim = 16;  // n_embd / n_heads: no key_length
  ASSERT_TRUE(write_random_llama(spec, path).is_ok());
  {
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    EXPECT_EQ((*f)->find_tensor("output.weight"), nullptr);
    EXPECT_EQ((*f)->find("llama.attention.key_length"), nullptr);
    EXPECT_EQ((*f)->find_tensor("token_embd.weight")->type, GgmlType::kF16);
    EXPECT_EQ((*f)->find_tensor("output_norm.weight")->type, GgmlType::kF32);
    EXPECT_EQ((*f)->tensors().size(), 2u + 2u * 9u);
  }
  std::filesystem::remove(path);
}

// Every matrix type the quant layer can quantize: right type, size and ftype, sane values.
TEST(RandomModel, QuantizedModelsReadBack) {
  const std::pair<GgmlType, uint64_t> types[] = {{GgmlType::kQ8_0, 7},  {GgmlType::kQ4_0, 2}, {GgmlType::kQ4_1, 3},
                                                 {GgmlType::kQ5_0, 8},  {GgmlType::kQ5_1, 9}, {GgmlType::kQ4_K, 14},
                                                 {GgmlType::kQ5_K, 16}, {GgmlType::kQ6_K, 18}, {GgmlType::kBF16, 32}};
  int tested = 0;
  for (const auto& [type, ftype] : types) {
    const WeightFormat* wf = find_weight_format(type);
    if (!wf || !wf->quantize_row_ref || !wf->dequantize_row_ref) continue;
    SCOPED_TRACE(wf->name);
    RandomModelSpec spec = tiny(type);
    spec.n_embd = 256;
    spec.head_dim = 64;
    spec.n_ff = 512;
    spec.n_layers = 1;
    const std::string path = temp_path("vlkv_random_llama_q.gguf");
    ASSERT_TRUE(write_random_llama(spec, path).is_ok());
    {
      auto f = GgufFile::open(path);
      ASSERT_TRUE(f.is_ok()) << f.status().message();
      const GgufTensorInfo* t = (*f)->find_tensor("blk.0.ffn_down.weight");
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->type, type);
      EXPECT_EQ(t->n_bytes, 256u * (512u / wf->block_elems) * wf->block_bytes);
      EXPECT_EQ((*f)->get_u64("general.file_type").value(), ftype);
      // A dequantized row has about the variance it was drawn with (1/fan_in = 1/512).
      std::vector<float> row(512);
      wf->dequantize_row_ref(t->data, row.data(), 512);
      double s2 = 0;
      for (float x : row) s2 += double(x) * x;
      EXPECT_NEAR(s2 / 512, 1.0 / 512, 0.5 / 512);
    }
    std::filesystem::remove(path);
    ++tested;
  }
  if (tested == 0) GTEST_SKIP() << "no quantizer available yet";
}

TEST(RandomModel, RejectsBadSpecs) {
  const std::string path = temp_path("vlkv_random_llama_bad.gguf");
  RandomModelSpec s = tiny(GgmlType::kF32);
  s.n_vocab = 100;
  EXPECT_EQ(write_random_llama(s, path).code(), StatusCode::kInvalidArgument);
  s = tiny(GgmlType::kF32);
  s.n_kv_heads = 3;
  EXPECT_EQ(write_random_llama(s, path).code(), StatusCode::kInvalidArgument);
  s = tiny(GgmlType::kQ4_K);  // 64 is not a multiple of 256
  const Status st = write_random_llama(s, path);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("block size 256"), std::string::npos) << st.message();
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace vlkv

namespace vlkv {
namespace {

// --arch qwen2vl: keys under the arch's prefix, q/k/v biases, M-RoPE sections of Qwen2-VL's
// split (t = head_dim/8, h = w = the rest halved: 16/24/24 at head_dim 128), and vlkv's own
// loader reads it as a qwen2vl text model.
TEST(RandomModel, Qwen2VlArchHasBiasesAndMropeSections) {
  const std::string path = (std::filesystem::temp_directory_path() / "vlkv_random_qwen2vl.gguf").string();
  RandomModelSpec s;
  s.arch = "qwen2vl";
  s.n_embd = 256;
  s.n_heads = 2;
  s.n_kv_heads = 1;
  s.head_dim = 128;
  s.n_layers = 1;
  s.weight_type = GgmlType::kF16;
  ASSERT_TRUE(write_random_llama(s, path).is_ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ((*f)->get_string("general.architecture").value(), "qwen2vl");
  EXPECT_EQ((*f)->get_u64("qwen2vl.embedding_length").value(), 256u);
  ASSERT_NE((*f)->find_tensor("blk.0.attn_k.bias"), nullptr);
  EXPECT_EQ((*f)->find_tensor("blk.0.attn_k.bias")->dims, std::vector<int64_t>{128});
  auto hp = read_text_hparams(**f);
  ASSERT_TRUE(hp.is_ok()) << hp.status().message();
  EXPECT_EQ(hp->arch, TextArch::kQwen2Vl);
  EXPECT_TRUE(hp->qkv_bias);
  EXPECT_EQ(hp->rope_sections, (std::array<int, 4>{16, 24, 24, 0}));
  s.arch = "mamba";
  EXPECT_FALSE(write_random_llama(s, path).is_ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace vlkv

namespace vlkv {
namespace {

// --arch qwen3vl and gemma3: the matching text models of the mmproj presets. vlkv's own loader
// reads them as those architectures (q/k norms, deepstack, sliding windows) and binds their weights.
TEST(RandomModel, Qwen3VlAndGemma3ArchsLoad) {
  for (const char* arch : {"qwen3vl", "gemma3"}) {
    const std::string path =
        (std::filesystem::temp_directory_path() / (std::string("vlkv_random_") + arch + ".gguf")).string();
    RandomModelSpec s;
    s.arch = arch;
    s.n_embd = 256;
    s.n_heads = 4;
    s.n_kv_heads = 2;
    s.head_dim = 64;
    s.n_layers = 6;
    s.weight_type = GgmlType::kQ8_0;
    ASSERT_TRUE(write_random_llama(s, path).is_ok()) << arch;
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    auto hp = read_text_hparams(**f);
    ASSERT_TRUE(hp.is_ok()) << arch << ": " << hp.status().message();
    EXPECT_TRUE(hp->qk_norm) << arch;
    EXPECT_EQ(hp->arch, std::string(arch) == "gemma3" ? TextArch::kGemma3 : TextArch::kQwen3Vl);
    if (std::string(arch) == "qwen3vl") {
      EXPECT_EQ(hp->n_deepstack_layers, 3);
      EXPECT_EQ(hp->rope_sections, (std::array<int, 4>{12, 10, 10, 0}));  // 24/20/20 at head_dim 128
    } else {
      EXPECT_EQ(hp->sliding_window, 1024);
      EXPECT_TRUE(hp->is_sliding(0));
      EXPECT_FALSE(hp->is_sliding(5));
      EXPECT_TRUE(hp->tied_output);
    }
    auto w = bind_text_weights(**f, *hp);
    ASSERT_TRUE(w.is_ok()) << arch << ": " << w.status().message();
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace vlkv

