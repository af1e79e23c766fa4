// Hostile and broken GGUF images: each must give a clean Status naming what is wrong.
#include <gtest/gtest.h>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "gguf_test_util.h"

namespace vlkv {
namespace {

using testing::RawGguf;

Status parse(const std::vector<uint8_t>& b, const GgufLimits& limits = {}) {
  auto f = GgufFile::parse(b.data(), b.size(), "bad.gguf", limits);
  return f.is_ok() ? Status::ok() : f.status();
}

// Expects an error whose message names the file and contains `what`.
void expect_error(const std::vector<uint8_t>& b, const std::string& what,
                  StatusCode code = StatusCode::kInvalidFile) {
  const Status s = parse(b);
  ASSERT_FALSE(s.is_ok()) << "parsed, expected: " << what;
  EXPECT_EQ(s.code(), code) << s.message();
  EXPECT_EQ(s.message().rfind("bad.gguf: ", 0), 0u) << s.message();
  EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
}

// A valid file with one f32 tensor "w" [8] at offset 0.
RawGguf one_tensor(std::vector<uint64_t> dims = {8}, uint32_t type = 0, uint64_t offset = 0,
                   size_t data_bytes = 32) {
  RawGguf r;
  r.header(3, 1, 1).kv_u32("k", 1).tensor("w", dims, type, offset).pad_to(32).zeros(data_bytes);
  return r;
}

TEST(GgufBadInput, ValidBaselineParses) {
  EXPECT_TRUE(parse(one_tensor().b).is_ok());
  RawGguf v2;
  v2.header(2, 0, 0);
  EXPECT_TRUE(parse(v2.b).is_ok());
}

// Every proper prefix of a small valid file fails cleanly (never crashes).
TEST(GgufBadInput, EveryTruncationFails) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set("a", gguf_array(GgufValueType::kArray,
                        {gguf_string_array({"x", "yz"}), gguf_array(GgufValueType::kInt16, {gguf_i16(1)})}));
  w.set_f32("f", 1.0f);
  w.set_bool("b", true);
  w.set_alignment(16);
  const float x[8] = {};
  ASSERT_TRUE(w.add_tensor("t0", GgmlType::kF32, {8}, x, sizeof(x)).is_ok());
  ASSERT_TRUE(w.add_tensor("t1", GgmlType::kF16, {2, 2}, x, 8).is_ok());
  auto full = w.write_to_buffer();
  ASSERT_TRUE(full.is_ok());
  auto g = GgufFile::parse(full->data(), full->size(), "full.gguf");
  ASSERT_TRUE(g.is_ok());
  // The padding after the last tensor is optional: cutting it off leaves a valid file.
  const GgufTensorInfo& last = (*g)->tensors().back();
  const size_t needed = (*g)->data_offset() + last.offset + last.n_bytes;
  ASSERT_LT(needed, full->size());
  for (size_t n = 0; n < full->size(); ++n) {
    // Copy into an exactly sized heap buffer so ASan catches any read past the end.
    std::vector<uint8_t> prefix(full->begin(), full->begin() + static_cast<std::ptrdiff_t>(n));
    const Status s = parse(prefix);
    if (n >= needed) {
      EXPECT_TRUE(s.is_ok()) << "prefix " << n << ": " << s.message();
      continue;
    }
    EXPECT_FALSE(s.is_ok()) << "prefix " << n;
    EXPECT_EQ(s.code(), StatusCode::kInvalidFile) << s.message();
  }
}

TEST(GgufBadInput, WrongMagic) {
  RawGguf r = one_tensor();
  r.b[0] = 'X';
  expect_error(r.b, "not a GGUF file");
}

TEST(GgufBadInput, Versions) {
  RawGguf v1;
  v1.header(1, 0, 0);
  expect_error(v1.b, "version 1 is not supported", StatusCode::kUnsupported);
  RawGguf v4;
  v4.header(4, 0, 0);
  expect_error(v4.b, "unknown GGUF version 4", StatusCode::kUnsupported);
  RawGguf be;
  be.header(0x03000000u, 0, 0);
  expect_error(be.b, "big-endian", StatusCode::kUnsupported);
}

TEST(GgufBadInput, AbsurdCounts) {
  RawGguf t;
  t.header(3, ~0ull, 0);
  expect_error(t.b, "tensor count");
  RawGguf k;
  k.header(3, 0, 1ull << 40);
  expect_error(k.b, "metadata count");
  // Within the limits but more than the remaining bytes could hold: rejected before allocating.
  RawGguf fit;
  fit.header(3, 1000, 1000).zeros(100);
  expect_error(fit.b, "cannot fit");
}

TEST(GgufBadInput, AbsurdStringLength) {
  RawGguf key;
  key.header(3, 0, 1).u64(~0ull).zeros(16);
  expect_error(key.b, "metadata key at offset 24 has length");
  RawGguf val;
  val.header(3, 0, 1).str("k").u32(8).u64(1000).bytes("abc", 3);
  expect_error(val.b, "string value at offset 37 has length 1000 but only 3 bytes remain");
}

TEST(GgufBadInput, AbsurdArrayLength) {
  RawGguf r;
  r.header(3, 0, 1).str("arr").u32(9).u32(0).u64(1ull << 62).zeros(16);
  expect_error(r.b, "array length 4611686018427387904 exceeds the limit");
  RawGguf fit;  // under the limit, but 1M u32 cannot fit in 16 bytes
  fit.header(3, 0, 1).str("arr").u32(9).u32(4).u64(1u << 20).zeros(16);
  expect_error(fit.b, "cannot fit in the 16 bytes");
  RawGguf strs;  // strings need at least 8 bytes each
  strs.header(3, 0, 1).str("arr").u32(9).u32(8).u64(3).zeros(16);
  expect_error(strs.b, "cannot fit");
  RawGguf type;
  type.header(3, 0, 1).str("arr").u32(9).u32(13).u64(1).zeros(8);
  expect_error(type.b, "unknown array element type 13");
}

TEST(GgufBadInput, ArrayNestingTooDeep) {
  RawGguf r;
  r.header(3, 0, 1).str("deep").u32(9);
  for (int i = 0; i < 10; ++i) r.u32(9).u64(1);
  r.zeros(64);
  expect_error(r.b, "arrays nest deeper than 4");
  // Depth 4 (the limit) is fine.
  GgufValue v = gguf_array(GgufValueType::kUint8, {gguf_u8(7)});
  for (int i = 0; i < 3; ++i) v = gguf_array(GgufValueType::kArray, {v});
  GgufWriter w;
  w.set("ok", v);
  EXPECT_TRUE(parse(w.write_to_buffer().value()).is_ok());
  w.set("ok", gguf_array(GgufValueType::kArray, {v}));
  EXPECT_FALSE(parse(w.write_to_buffer().value()).is_ok());
}

TEST(GgufBadInput, BadValues) {
  RawGguf type;
  type.header(3, 0, 1).str("k").u32(77).u32(0);
  expect_error(type.b, "'k' has unknown value type 77");
  RawGguf b;
  b.header(3, 0, 1).str("k").u32(7).u8(2);
  expect_error(b.b, "bool value 2");
  RawGguf dup;
  dup.header(3, 0, 2).kv_u32("k", 1).kv_u32("k", 2);
  expect_error(dup.b, "duplicate metadata key 'k'");
  RawGguf empty;
  empty.header(3, 0, 1).kv_u32("", 1);
  expect_error(empty.b, "empty key");
}

TEST(GgufBadInput, TensorBytesOutsideFile) {
  expect_error(one_tensor({8}, 0, 0, 31).b, "tensor 'w' bytes [");
  expect_error(one_tensor({8}, 0, 0, 31).b, "lie outside the file (size");
  expect_error(one_tensor({8}, 0, 1ull << 20).b, "lie outside the file");
  expect_error(one_tensor({8}, 0, ~0ull - 31).b, "overflows");
}

TEST(GgufBadInput, MisalignedOffset) {
  expect_error(one_tensor({8}, 0, 4, 64).b, "not a multiple of the alignment 32");
}

TEST(GgufBadInput, TensorTypeAndDims) {
  expect_error(one_tensor({8}, 4).b, "unknown ggml type id 4");
  expect_error(one_tensor({8}, 99).b, "unknown ggml type id 99");
  expect_error(one_tensor({8, 0}).b, "dim 1 is 0");
  expect_error(one_tensor({~0ull}).b, "must be positive");
  expect_error(one_tensor({1, 1, 1, 1, 1}).b, "has 5 dims");
  expect_error(one_tensor({}).b, "has 0 dims");
  expect_error(one_tensor({1ull << 32, 1ull << 32}).b, "element count overflows");
  expect_error(one_tensor({16}, 2).b, "not a multiple of the q4_0 block size 32");
  // A type we cannot compute with (iq2_xxs) is still a valid file.
  EXPECT_TRUE(parse(one_tensor({256}, 16, 0, 66).b).is_ok());
}

TEST(GgufBadInput, DuplicateTensorName) {
  RawGguf r;
  r.header(3, 2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad_to(32).zeros(64);
  expect_error(r.b, "duplicate tensor 'w'");
}

TEST(GgufBadInput, BadAlignment) {
  for (uint32_t a : {0u, 3u, 24u}) {
    RawGguf r;
    r.header(3, 0, 1).kv_u32("general.alignment", a);
    expect_error(r.b, "general.alignment " + std::to_string(a) + " is not a nonzero power of two");
  }
  RawGguf s;
  s.header(3, 0, 1).str("general.alignment").u32(8).str("x");
  expect_error(s.b, "general.alignment has type string");
}

TEST(GgufBadInput, MetadataMemoryLimit) {
  GgufWriter w;
  std::vector<std::string> many(1000, "ab");
  w.set("v", gguf_string_array(many));
  GgufLimits limits;
  limits.max_metadata_memory = 10000;
  const Status s = parse(w.write_to_buffer().value(), limits);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("memory limit"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace vlkv
