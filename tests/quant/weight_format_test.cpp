#include "quant/weight_format.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace vlkv {
namespace {

TEST(WeightFormat, RegistryHasElevenTypes) {
  const GgmlType ours[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,
                           GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                           GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
  for (GgmlType t : ours) {
    const WeightFormat* f = find_weight_format(t);
    ASSERT_NE(f, nullptr) << static_cast<int>(t);
    EXPECT_EQ(f->type, t);
    EXPECT_STREQ(f->name, ggml_type_name(t));
  }
  EXPECT_EQ(find_weight_format(GgmlType::kQ8_1), nullptr);
  EXPECT_EQ(find_weight_format(GgmlType::kQ2_K), nullptr);
}

TEST(WeightFormat, TypeNames) {
  EXPECT_STREQ(ggml_type_name(GgmlType::kQ4_K), "q4_K");
  EXPECT_STREQ(ggml_type_name(GgmlType::kQ8_K), "q8_K");
  EXPECT_STREQ(ggml_type_name(static_cast<GgmlType>(16)), "iq2_xxs");
  EXPECT_STREQ(ggml_type_name(static_cast<GgmlType>(29)), "iq1_m");
  EXPECT_STREQ(ggml_type_name(static_cast<GgmlType>(39)), "mxfp4");
  EXPECT_STREQ(ggml_type_name(GgmlType::kBF16), "bf16");
  EXPECT_EQ(std::string(ggml_type_name(static_cast<GgmlType>(4))), "type4");  // removed Q4_2
  EXPECT_EQ(std::string(ggml_type_name(static_cast<GgmlType>(1000))), "type1000");
}

TEST(WeightFormat, RowBytes) {
  EXPECT_EQ(row_bytes(GgmlType::kF32, 7).value(), 28u);
  EXPECT_EQ(row_bytes(GgmlType::kQ4_0, 4096).value(), 128u * 18u);
  EXPECT_EQ(row_bytes(GgmlType::kQ6_K, 4096).value(), 16u * 210u);
  EXPECT_EQ(row_bytes(GgmlType::kQ8_0, 0).value(), 0u);

  const auto not_multiple = row_bytes(GgmlType::kQ8_0, 33);
  ASSERT_FALSE(not_multiple.is_ok());
  EXPECT_EQ(not_multiple.status().code(), StatusCode::kInvalidArgument);

  const auto unsupported_type = row_bytes(GgmlType::kQ2_K, 256);
  ASSERT_FALSE(unsupported_type.is_ok());
  EXPECT_EQ(unsupported_type.status().code(), StatusCode::kUnsupported);

  EXPECT_FALSE(row_bytes(GgmlType::kF16, -2).is_ok());
  // 2^62 f32 elements need 2^64 bytes.
  const auto overflow = row_bytes(GgmlType::kF32, int64_t{1} << 62);
  ASSERT_FALSE(overflow.is_ok());
  EXPECT_EQ(overflow.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(row_bytes(GgmlType::kF32, int64_t{1} << 60).is_ok());
}

}  // namespace
}  // namespace vlkv
