#include "gguf/gguf_writer.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <gtest/gtest.h>
#include <numeric>

#include "gguf/ggml_type_info.h"

namespace vlkv {
namespace {

std::vector<std::pair<std::string, GgufValue>> every_value_type() {
  std::vector<std::pair<std::string, GgufValue>> kv;
  kv.emplace_back("t.u8", gguf_u8(250));
  kv.emplace_back("t.i8", gguf_i8(-120));
  kv.emplace_back("t.u16", gguf_u16(65000));
  kv.emplace_back("t.i16", gguf_i16(-32000));
  kv.emplace_back("t.u32", gguf_u32(4000000000u));
  kv.emplace_back("t.i32", gguf_i32(-2000000000));
  kv.emplace_back("t.u64", gguf_u64(0xfedcba9876543210ull));
  kv.emplace_back("t.i64", gguf_i64(-0x7edcba9876543210ll));
  kv.emplace_back("t.f32", gguf_f32(3.25f));
  kv.emplace_back("t.f64", gguf_f64(-1e300));
  kv.emplace_back("t.bool", gguf_bool(true));
  kv.emplace_back("t.string", gguf_string(std::string("héllo\n\0x", 9)));
  kv.emplace_back("t.empty_string", gguf_string(""));
  kv.emplace_back("t.strings", gguf_string_array({"a", "", "▁the"}));
  const float fs[] = {1.5f, -2.0f, 1e-30f};
  kv.emplace_back("t.f32s", gguf_f32_array(fs));
  const int32_t is[] = {1, -1, 7};
  kv.emplace_back("t.i32s", gguf_i32_array(is));
  kv.emplace_back("t.bools", gguf_array(GgufValueType::kBool, {gguf_bool(false), gguf_bool(true)}));
  kv.emplace_back("t.empty", gguf_array(GgufValueType::kFloat64, {}));
  // Nested: array of arrays of u8, and array of arrays of arrays of strings.
  kv.emplace_back("t.nested", gguf_array(GgufValueType::kArray,
                                         {gguf_array(GgufValueType::kUint8, {gguf_u8(1), gguf_u8(2)}),
                                          gguf_array(GgufValueType::kInt64, {gguf_i64(-5)}),
                                          gguf_array(GgufValueType::kString, {})}));
  kv.emplace_back("t.nested3", gguf_array(GgufValueType::kArray,
                                          {gguf_array(GgufValueType::kArray, {gguf_string_array({"x", "y"})})}));
  return kv;
}

TEST(GgufWriter, RoundTripsEveryValueType) {
  GgufWriter w;
  const auto kv = every_value_type();
  for (const auto& [k, v] : kv) w.set(k, v);
  auto bytes = w.write_to_buffer();
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  auto f = GgufFile::parse(bytes->data(), bytes->size(), "rt.gguf");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ((*f)->version(), 3u);
  ASSERT_EQ((*f)->metadata().size(), kv.size());
  for (size_t i = 0; i < kv.size(); ++i) {
    SCOPED_TRACE(kv[i].first);
    EXPECT_EQ((*f)->metadata()[i].first, kv[i].first);  // file order kept
    EXPECT_TRUE((*f)->metadata()[i].second == kv[i].second);
  }
  EXPECT_EQ((*f)->get_string("t.string").value(), std::string("héllo\n\0x", 9));
  EXPECT_EQ((*f)->get_string_array("t.strings").value(), (std::vector<std::string>{"a", "", "▁the"}));
  EXPECT_TRUE((*f)->tensors().empty());
}

TEST(GgufWriter, SetReplacesKeepingPosition) {
  GgufWriter w;
  w.set_u32("a", 1);
  w.set_u32("b", 2);
  w.set_string("a", "x");
  auto bytes = w.write_to_buffer();
  ASSERT_TRUE(bytes.is_ok());
  auto f = GgufFile::parse(bytes->data(), bytes->size(), "m");
  ASSERT_TRUE(f.is_ok());
  ASSERT_EQ((*f)->metadata().size(), 2u);
  EXPECT_EQ((*f)->metadata()[0].first, "a");
  EXPECT_EQ((*f)->get_string("a").value(), "x");
}

TEST(GgufWriter, RoundTripsTensorsAtEveryAlignment) {
  for (uint32_t alignment : {1u, 8u, 32u, 64u, 4096u}) {
    SCOPED_TRACE(alignment);
    GgufWriter w;
    w.set_string("general.architecture", "test");
    if (alignment != 32) w.set_alignment(alignment);
    std::vector<float> a(3 * 5);
    std::iota(a.begin(), a.end(), 0.0f);
    ASSERT_TRUE(w.add_tensor("a", GgmlType::kF32, {3, 5}, a.data(), a.size() * 4).is_ok());
    std::vector<uint8_t> q(34 * 2 * 3);  // q8_0 [64, 3]
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint8_t>(i * 7);
    ASSERT_TRUE(w.add_tensor("b.q", GgmlType::kQ8_0, {64, 3}, q.data(), q.size()).is_ok());
    int calls = 0;
    ASSERT_TRUE(w.add_tensor("c.filled", GgmlType::kQ2_K, {256, 1, 2, 1},
                             [&](uint8_t* dst, size_t n) {
                               ++calls;
                               EXPECT_EQ(n, 84u * 2u);
                               for (size_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>(255 - i);
                               return Status::ok();
                             })
                    .is_ok());
    auto bytes = w.write_to_buffer();
    ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
    EXPECT_EQ(calls, 1);
    auto f = GgufFile::parse(bytes->data(), bytes->size(), "t.gguf");
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    const GgufFile& g = **f;
    EXPECT_EQ(g.alignment(), alignment);
    EXPECT_EQ(g.data_offset() % alignment, 0u);
    ASSERT_EQ(g.tensors().size(), 3u);
    const GgufTensorInfo* ta = g.find_tensor("a");
    ASSERT_NE(ta, nullptr);
    EXPECT_EQ(ta->dims, (std::vector<int64_t>{3, 5}));
    EXPECT_EQ(0, std::memcmp(ta->data, a.data(), a.size() * 4));
    const GgufTensorInfo* tb = g.find_tensor("b.q");
    ASSERT_NE(tb, nullptr);
    EXPECT_EQ(tb->type, GgmlType::kQ8_0);
    EXPECT_EQ(tb->n_bytes, q.size());
    EXPECT_EQ(0, std::memcmp(tb->data, q.data(), q.size()));
    const GgufTensorInfo* tc = g.find_tensor("c.filled");
    ASSERT_NE(tc, nullptr);
    EXPECT_EQ(tc->dims.size(), 4u);
    EXPECT_EQ(tc->data[0], 255);
    EXPECT_EQ(tc->data[167], 255 - 167);
  }
}

TEST(GgufWriter, WritesAndOpensAFile) {
  const std::string path = (std::filesystem::temp_directory_path() / "vlkv_gguf_writer_test.gguf").string();
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  const float x[4] = {1, 2, 3, 4};
  ASSERT_TRUE(w.add_tensor("x", GgmlType::kF32, {4}, x, sizeof(x)).is_ok());
  ASSERT_TRUE(w.write_to_file(path).is_ok());
  {
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    EXPECT_EQ((*f)->path(), path);
    EXPECT_EQ(reinterpret_cast<const float*>((*f)->find_tensor("x")->data)[3], 4.0f);
  }
  std::filesystem::remove(path);
}

TEST(GgufWriter, RejectsBadInput) {
  GgufWriter w;
  const float x[4] = {};
  EXPECT_FALSE(w.add_tensor("x", GgmlType::kF32, {4}, x, 12).is_ok());           // wrong size
  EXPECT_FALSE(w.add_tensor("", GgmlType::kF32, {4}, x, 16).is_ok());            // empty name
  EXPECT_FALSE(w.add_tensor("q", GgmlType::kQ4_0, {16}, x, 9).is_ok());          // not a block multiple
  EXPECT_FALSE(w.add_tensor("z", GgmlType::kF32, {0}, x, 0).is_ok());            // zero dim
  EXPECT_FALSE(w.add_tensor("d5", GgmlType::kF32, {1, 1, 1, 1, 1}, x, 4).is_ok());
  EXPECT_FALSE(w.add_tensor("u", static_cast<GgmlType>(4), {4}, x, 16).is_ok());  // removed type id
  ASSERT_TRUE(w.add_tensor("x", GgmlType::kF32, {4}, x, 16).is_ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::kF32, {4}, x, 16).is_ok());           // duplicate
  GgufWriter bad_array;
  bad_array.set("a", gguf_array(GgufValueType::kUint8, {gguf_u16(1)}));
  EXPECT_FALSE(bad_array.write_to_buffer().is_ok());
  GgufWriter bad_align;
  bad_align.set_alignment(24);
  EXPECT_FALSE(bad_align.write_to_buffer().is_ok());
  GgufWriter failing;
  ASSERT_TRUE(failing.add_tensor("f", GgmlType::kF32, {2},
                                 [](uint8_t*, size_t) { return io_error("producer failed"); })
                  .is_ok());
  auto r = failing.write_to_buffer();
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("producer failed"), std::string::npos);
}

TEST(GgmlTypeInfo, TableIsConsistent) {
  EXPECT_EQ(std::string(ggml_type_info(GgmlType::kQ4_K)->name), "q4_K");
  EXPECT_EQ(ggml_type_info(GgmlType::kQ6_K)->block_bytes, 210u);
  EXPECT_EQ(ggml_type_info(GgmlType::kIQ4_XS)->block_bytes, 136u);
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 1000u}) EXPECT_EQ(ggml_type_info(removed), nullptr);
  uint32_t prev = 0;
  for (const GgmlTypeInfo& t : ggml_type_infos()) {
    EXPECT_EQ(ggml_type_info(t.type), &t);
    EXPECT_GT(t.block_elems, 0);
    EXPECT_GT(t.block_bytes, 0u);
    if (&t != &ggml_type_infos()[0]) {
      EXPECT_GT(static_cast<uint32_t>(t.type), prev);
    }
    prev = static_cast<uint32_t>(t.type);
  }
  const int64_t dims[] = {512, 3};
  EXPECT_EQ(ggml_tensor_bytes(GgmlType::kQ4_K, dims).value(), 2u * 144u * 3u);
  const int64_t huge[] = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_FALSE(ggml_tensor_bytes(GgmlType::kF32, huge).is_ok());
}

}  // namespace
}  // namespace vlkv
