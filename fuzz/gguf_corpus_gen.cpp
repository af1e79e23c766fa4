// Writes the seed corpus for gguf_fuzzer: tiny valid GGUF files made with GgufWriter
// and truncated copies of them. Usage: gguf_corpus_gen <out-dir>
#include <cstdio>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"

namespace {

using namespace vlkv;

bool save(const std::string& path, const std::vector<uint8_t>& b, size_t n) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(b.data(), 1, n, f) == n;
  return std::fclose(f) == 0 && ok;
}

std::vector<GgufWriter> seeds() {
  std::vector<GgufWriter> out;
  {  // metadata of every type, no tensors
    GgufWriter w;
    w.set("u8", gguf_u8(1)); w.set("i8", gguf_i8(-1)); w.set("u16", gguf_u16(2)); w.set("i16", gguf_i16(-2));
    w.set("u32", gguf_u32(3)); w.set("i32", gguf_i32(-3)); w.set("u64", gguf_u64(4)); w.set("i64", gguf_i64(-4));
    w.set("f32", gguf_f32(0.5f)); w.set("f64", gguf_f64(0.25)); w.set("b", gguf_bool(true));
    w.set("s", gguf_string("text"));
    w.set("ss", gguf_string_array({"<unk>", "<s>", "</s>", "\xe2\x96\x81" "a"}));
    w.set("nested", gguf_array(GgufValueType::kArray, {gguf_array(GgufValueType::kInt32, {gguf_i32(1), gguf_i32(2)}),
                                                       gguf_array(GgufValueType::kString, {gguf_string("x")})}));
    out.push_back(std::move(w));
  }
  {  // a tiny llama-like model, f32 + q8_0 + q4_K tensors
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_u32("llama.embedding_length", 32);
    w.set_u32("llama.block_count", 1);
    const float x[32] = {1, 2, 3};
    (void)w.add_tensor("output_norm.weight", GgmlType::kF32, {32}, x, sizeof(x));
    std::vector<uint8_t> q8(34 * 2, 7), q4k(144, 3);
    (void)w.add_tensor("blk.0.attn_q.weight", GgmlType::kQ8_0, {32, 2}, q8.data(), q8.size());
    (void)w.add_tensor("blk.0.ffn_up.weight", GgmlType::kQ4_K, {256, 1}, q4k.data(), q4k.size());
    out.push_back(std::move(w));
  }
  {  // custom alignment, f16 4-d tensor, exotic type
    GgufWriter w;
    w.set_alignment(8);
    const uint16_t h[6] = {0x3c00, 0, 0x3c00, 0, 0, 0x3c00};
    (void)w.add_tensor("t4", GgmlType::kF16, {1, 2, 3, 1}, h, sizeof(h));
    std::vector<uint8_t> iq(66, 1);
    (void)w.add_tensor("iq", GgmlType::kIQ2_XXS, {256}, iq.data(), iq.size());
    out.push_back(std::move(w));
  }
  {  // empty file: no metadata, no tensors
    out.emplace_back();
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <out-dir>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  int i = 0;
  for (const GgufWriter& w : seeds()) {
    auto b = w.write_to_buffer();
    if (!b.is_ok()) {
      std::fprintf(stderr, "%s\n", b.status().message().c_str());
      return 1;
    }
    const std::vector<uint8_t>& bytes = b.value();
    const std::string base = dir + "/seed" + std::to_string(i++);
    bool ok = save(base + ".gguf", bytes, bytes.size());
    ok = ok && save(base + "_half.gguf", bytes, bytes.size() / 2);
    ok = ok && save(base + "_cut.gguf", bytes, bytes.size() > 9 ? bytes.size() - 9 : 0);
    if (!ok) {
      std::fprintf(stderr, "cannot write %s\n", base.c_str());
      return 1;
    }
  }
  return 0;
}
