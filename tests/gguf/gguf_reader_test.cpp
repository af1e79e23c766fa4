#include "gguf/gguf_reader.h"

#include <filesystem>
#include <gtest/gtest.h>

#include "gguf/ggml_type_info.h"
#include "gguf/gguf_optional.h"
#include "gguf/gguf_writer.h"

namespace vlkv {
namespace {

const std::string kModels = std::string(VLKV_TEST_DATA) + "/fixtures/models";

// Every fixture model opens; every tensor lies inside the file and has a known type.
TEST(GgufReader, OpensEveryFixtureModel) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kModels)) {
    if (entry.path().extension() != ".gguf") continue;
    SCOPED_TRACE(entry.path().string());
    auto f = GgufFile::open(entry.path().string());
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    const GgufFile& g = **f;
    EXPECT_TRUE(g.version() == 2 || g.version() == 3);
    EXPECT_FALSE(g.tensors().empty());
    EXPECT_TRUE(g.get_string("general.architecture").is_ok());
    for (const GgufTensorInfo& t : g.tensors()) {
      ASSERT_NE(ggml_type_info(t.type), nullptr);
      EXPECT_NE(t.data, nullptr);
      EXPECT_EQ(t.offset % g.alignment(), 0u);
      EXPECT_LE(g.data_offset() + t.offset + t.n_bytes, g.file_size());
      EXPECT_EQ(g.find_tensor(t.name), &t);
    }
    ++n;
  }
  EXPECT_GE(n, 10);
}

TEST(GgufReader, Stories260KFacts) {
  auto f = GgufFile::open(kModels + "/stories260K.gguf");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  const GgufFile& g = **f;
  EXPECT_EQ(g.get_string("general.architecture").value(), "llama");
  EXPECT_EQ(g.get_u64("llama.embedding_length").value(), 64u);
  EXPECT_EQ(g.get_u64("llama.block_count").value(), 5u);
  EXPECT_EQ(g.get_u64("llama.attention.head_count").value(), 8u);
  EXPECT_EQ(g.get_u64("llama.attention.head_count_kv").value(), 4u);
  EXPECT_EQ(g.get_u64("llama.context_length").value(), 512u);
  EXPECT_EQ(g.get_u64("llama.feed_forward_length").value(), 172u);
  EXPECT_NEAR(g.get_f64("llama.attention.layer_norm_rms_epsilon").value(), 1e-5, 1e-9);
  EXPECT_EQ(g.get_string("tokenizer.ggml.model").value(), "llama");
  EXPECT_EQ(g.get_u64("tokenizer.ggml.bos_token_id").value(), 1u);
  EXPECT_EQ(g.get_u64("tokenizer.ggml.eos_token_id").value(), 2u);
  auto tokens = g.get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.is_ok()) << tokens.status().message();
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[1], "<s>");
  auto scores = g.get_f64_array("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.is_ok());
  EXPECT_EQ(scores->size(), 512u);
  auto types = g.get_i64_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.is_ok()) << types.status().message();
  EXPECT_EQ((*types)[0], 2);  // <unk> is UNKNOWN

  // token_embd, output_norm, output + 9 per block.
  EXPECT_EQ(g.tensors().size(), 3u + 5u * 9u);
  const GgufTensorInfo* emb = g.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, GgmlType::kF32);
  EXPECT_EQ(emb->dims, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(emb->n_elements(), 64 * 512);
  EXPECT_EQ(emb->n_bytes, 64u * 512u * 4u);
  const GgufTensorInfo* ffn = g.find_tensor("blk.4.ffn_down.weight");
  ASSERT_NE(ffn, nullptr);
  EXPECT_EQ(ffn->dims, (std::vector<int64_t>{172, 64}));
  EXPECT_EQ(g.find_tensor("blk.5.ffn_down.weight"), nullptr);
}

TEST(GgufReader, MissingFileIsNotFound) {
  auto f = GgufFile::open(kModels + "/no-such-model.gguf");
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
}

// Getters convert between integer widths when the value fits and refuse otherwise.
TEST(GgufReader, GetterConversions) {
  GgufWriter w;
  w.set("i32", gguf_i32(5));
  w.set("neg", gguf_i8(-3));
  w.set("big", gguf_u64(~0ull));
  w.set("f", gguf_f32(0.5f));
  w.set("b", gguf_bool(true));
  w.set("s", gguf_string("x"));
  w.set("u16s", gguf_array(GgufValueType::kUint16, {gguf_u16(1), gguf_u16(65535)}));
  w.set("u64s", gguf_array(GgufValueType::kUint64, {gguf_u64(~0ull)}));
  auto bytes = w.write_to_buffer();
  ASSERT_TRUE(bytes.is_ok());
  auto f = GgufFile::parse(bytes->data(), bytes->size(), "conv.gguf");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  const GgufFile& g = **f;
  EXPECT_EQ(g.get_u64("i32").value(), 5u);
  EXPECT_EQ(g.get_i64("i32").value(), 5);
  EXPECT_EQ(g.get_f64("i32").value(), 5.0);
  EXPECT_EQ(g.get_i64("neg").value(), -3);
  EXPECT_EQ(g.get_u64("neg").status().code(), StatusCode::kInvalidFile);
  EXPECT_EQ(g.get_u64("big").value(), ~0ull);
  EXPECT_EQ(g.get_i64("big").status().code(), StatusCode::kInvalidFile);
  EXPECT_EQ(g.get_f64("f").value(), 0.5);
  EXPECT_FALSE(g.get_u64("f").is_ok());
  EXPECT_TRUE(g.get_bool("b").value());
  EXPECT_FALSE(g.get_bool("i32").is_ok());
  EXPECT_FALSE(g.get_string("i32").is_ok());
  EXPECT_EQ(g.get_string("s").value(), "x");
  EXPECT_EQ(g.get_i64_array("u16s").value(), (std::vector<int64_t>{1, 65535}));
  EXPECT_EQ(g.get_f64_array("u16s").value(), (std::vector<double>{1, 65535}));
  EXPECT_FALSE(g.get_i64_array("u64s").is_ok());
  EXPECT_FALSE(g.get_string_array("u16s").is_ok());
  EXPECT_FALSE(g.get_i64_array("s").is_ok());
  auto missing = g.get_u64("nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("conv.gguf"), std::string::npos);
  EXPECT_NE(g.get_u64("s").status().message().find("'s' has type string"), std::string::npos);
  // gguf_i64_or: the fallback only for a missing key, never for a wrong type or range.
  EXPECT_EQ(gguf_i64_or(g, "nope", 7).value(), 7);
  EXPECT_EQ(gguf_i64_or(g, "neg", 7).value(), -3);
  EXPECT_EQ(gguf_i64_or(g, "s", 7).status().code(), StatusCode::kInvalidFile);
  EXPECT_EQ(gguf_i64_or(g, "big", 7).status().code(), StatusCode::kInvalidFile);
}

}  // namespace
}  // namespace vlkv
