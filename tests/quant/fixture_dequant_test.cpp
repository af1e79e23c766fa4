// Dequantizes every weight matrix of the rand-llama-q-<type>.gguf fixtures (made by
// llama-quantize) and compares with the manifest's checksums of llama.cpp's own
// dequantization: the sha256 of the f32 bytes (bit-exact) and the float64 sum, sum of
// absolute values and sum of squares (within 1e-6 of the sum of absolute values).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "quant/weight_format.h"
#include "quant_test_util.h"
#include "sha256_test_util.h"

namespace vlkv {
namespace {

const std::string kFixtures = std::string(VLKV_TEST_DATA) + "/fixtures";

nlohmann::json load_manifest() {
  std::ifstream in(kFixtures + "/manifest.json");
  return nlohmann::json::parse(in);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

class FixtureDequant : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureDequant, MatchesLlamaCppDequantization) {
  const std::string model = GetParam();
  const nlohmann::json manifest = load_manifest();
  const nlohmann::json& tensors = manifest.at("models").at(model).at("dequantized_tensors");
  ASSERT_GE(tensors.size(), 9u);
  auto file = GgufFile::open(kFixtures + "/models/" + model + ".gguf");
  ASSERT_TRUE(file.is_ok()) << file.status().message();

  quant_test::SimdLevelGuard guard;
  for (const auto& [name, want] : tensors.items()) {
    SCOPED_TRACE(model + " " + name);
    const GgufTensorInfo* t = (*file)->find_tensor(name);
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->dims.size(), 2u);
    const int64_t cols = t->dims[0], rows = t->dims[1];
    EXPECT_EQ(want.at("shape"), nlohmann::json::array({rows, cols}));
    const WeightFormat* f = find_weight_format(t->type);
    ASSERT_NE(f, nullptr) << ggml_type_name(t->type);
    EXPECT_EQ(lower(f->name), lower(want.at("type").get<std::string>()));
    const size_t rb = row_bytes(t->type, cols).value();
    ASSERT_EQ(rb * static_cast<size_t>(rows), t->n_bytes);

    std::vector<float> ref(static_cast<size_t>(rows * cols)), fast(ref.size());
    for (int64_t r = 0; r < rows; ++r) f->dequantize_row_ref(t->data + r * rb, ref.data() + r * cols, cols);
    quant_test::Sha256 sha;
    sha.update(ref.data(), ref.size() * sizeof(float));
    EXPECT_EQ(sha.hex_digest(), want.at("dequantized_f32_sha256").get<std::string>());

    double sum = 0, sum_abs = 0, sum_sq = 0;
    for (float v : ref) {
      sum += v;
      sum_abs += std::fabs(v);
      sum_sq += static_cast<double>(v) * v;
    }
    const double tol = 1e-6 * want.at("dequantized_sum_abs").get<double>();
    EXPECT_NEAR(sum, want.at("dequantized_sum").get<double>(), tol);
    EXPECT_NEAR(sum_abs, want.at("dequantized_sum_abs").get<double>(), tol);
    EXPECT_NEAR(sum_sq, want.at("dequantized_sum_sq").get<double>(), 1e-6 * want.at("dequantized_sum_sq").get<double>());

    // The fast paths give the same bits at every level.
    for (SimdLevel level : quant_test::available_levels()) {
      set_simd_level_for_testing(level);
      for (int64_t r = 0; r < rows; ++r) f->dequantize_row(t->data + r * rb, fast.data() + r * cols, cols);
      EXPECT_EQ(std::memcmp(fast.data(), ref.data(), ref.size() * sizeof(float)), 0) << simd_level_name(level);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, FixtureDequant,
                         ::testing::Values("rand-llama-q-q8_0", "rand-llama-q-q4_0", "rand-llama-q-q4_1",
                                           "rand-llama-q-q5_0", "rand-llama-q-q5_1", "rand-llama-q-q4_k",
                                           "rand-llama-q-q5_k", "rand-llama-q-q6_k", "rand-llama-q-bf16",
                                           "rand-llama-q-f16", "rand-llama-q-q4_k_m"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param.substr(std::string("rand-llama-q-").size());
                           return s;
                         });

// Our SHA-256 against the FIPS 180-4 example, so a mismatch above is about the data.
TEST(FixtureDequant, Sha256KnownAnswer) {
  quant_test::Sha256 sha;
  sha.update("abc", 3);
  EXPECT_EQ(sha.hex_digest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace vlkv
