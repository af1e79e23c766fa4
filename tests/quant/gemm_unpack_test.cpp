// gemm_unpack (the prefill GEMM's unpacked weight blocks) against each format's reference
// dequantization: scale * code + offset must give the reference's weights exactly.
#include "quant/gemm_unpack.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "quant/weight_format.h"

namespace vlkv::quant {
namespace {

struct Case {
  GgmlType type;
  std::vector<int> f16_at;  // byte offsets of the block's f16 fields (kept finite in raw blocks)
};

const Case kCases[] = {{GgmlType::kQ4_1, {0, 2}}, {GgmlType::kQ5_0, {0}},    {GgmlType::kQ5_1, {0, 2}},
                       {GgmlType::kQ4_K, {0, 2}}, {GgmlType::kQ5_K, {0, 2}}, {GgmlType::kQ6_K, {208}}};

// n weights of format c: quantized from normal floats, or raw (random bytes, finite f16 fields
// of either sign), so every code, scale and high-bit pattern occurs.
std::vector<uint8_t> make_blocks(const Case& c, int64_t n, bool raw, uint32_t seed) {
  const WeightFormat* fmt = find_weight_format(c.type);
  std::vector<uint8_t> bytes(static_cast<size_t>(n / fmt->block_elems) * fmt->block_bytes);
  std::mt19937 rng(seed);
  if (!raw) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> src(static_cast<size_t>(n));
    for (auto& v : src) v = dist(rng);
    fmt->quantize_row_ref(src.data(), bytes.data(), n);
    return bytes;
  }
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  for (size_t b = 0; b < bytes.size(); b += fmt->block_bytes)
    for (int at : c.f16_at) {
      const float v = std::ldexp(1.0f + static_cast<float>(rng() % 100) / 100.0f, -static_cast<int>(rng() % 10)) *
                      (rng() % 2 ? 1.0f : -1.0f);
      const uint16_t h = fp32_to_fp16(v);
      std::memcpy(bytes.data() + b + at, &h, 2);
    }
  return bytes;
}

// Tolerance 0: each scale * code product is exact (Q4_1/Q5_1/Q4_K/Q5_K: at most 17 + 5 bits)
// or the reference rounds the same product once (Q5_0, Q6_K), and the offset is added once.
TEST(GemmUnpack, ScaleTimesCodePlusOffsetIsTheReferenceWeight) {
  const int64_t n = 1024;
  for (const Case& c : kCases) {
    const GemmUnpackFormat* uf = find_gemm_unpack(c.type);
    ASSERT_NE(uf, nullptr) << ggml_type_name(c.type);
    const WeightFormat* fmt = find_weight_format(c.type);
    EXPECT_EQ(uf->block_elems, fmt->block_elems);
    EXPECT_EQ(uf->block_bytes, fmt->block_bytes);
    for (bool raw : {false, true}) {
      const std::vector<uint8_t> blocks = make_blocks(c, n, raw, 5);
      std::vector<float> ref(static_cast<size_t>(n));
      fmt->dequantize_row_ref(blocks.data(), ref.data(), n);
      const int groups = uf->split ? 2 : 1;
      std::vector<int8_t> q(static_cast<size_t>(n));
      std::vector<float> dw(static_cast<size_t>(n / 32 * groups)), off(static_cast<size_t>(n / 32), 0.0f);
      std::vector<int32_t> bias(dw.size());
      uf->unpack(blocks.data(), n / uf->block_elems, q.data(), dw.data(), bias.data(), uf->offset ? off.data() : nullptr);
      for (int64_t j = 0; j < n && uf->codes_0_63; ++j)
        ASSERT_TRUE(q[static_cast<size_t>(j)] >= 0 && q[static_cast<size_t>(j)] <= 63) << ggml_type_name(c.type);
      for (int64_t j = 0; j < n; ++j) {
        const size_t g = static_cast<size_t>(j / (32 / groups));
        const float w = std::fma(dw[g], static_cast<float>(q[static_cast<size_t>(j)]), off[static_cast<size_t>(j / 32)]);
        ASSERT_EQ(w, ref[static_cast<size_t>(j)]) << ggml_type_name(c.type) << (raw ? " raw" : "") << " weight " << j;
      }
      for (size_t g = 0; g < bias.size(); ++g) {
        int32_t s = 0;
        for (int j = 0; j < 32 / groups; ++j) s += q[g * static_cast<size_t>(32 / groups) + static_cast<size_t>(j)];
        ASSERT_EQ(bias[g], 128 * s) << ggml_type_name(c.type) << " group " << g;
      }
    }
  }
}

TEST(GemmUnpack, OnlyTheFormatsItUnpacks) {
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0})
    EXPECT_EQ(find_gemm_unpack(t), nullptr) << ggml_type_name(t);
}

}  // namespace
}  // namespace vlkv::quant
