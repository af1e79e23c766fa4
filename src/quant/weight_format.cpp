// The registry of weight formats, ggml type names and row sizes.
#include "quant/weight_format.h"

#include <cstdio>
#include <string>

#include "quant/quant_internal.h"

namespace vlkv {
namespace {

const WeightFormat* const kFormats[] = {
    &quant::kF32Format,  &quant::kF16Format,  &quant::kBf16Format, &quant::kQ8_0Format,
    &quant::kQ4_0Format, &quant::kQ4_1Format, &quant::kQ5_0Format, &quant::kQ5_1Format,
    &quant::kQ4_KFormat, &quant::kQ5_KFormat, &quant::kQ6_KFormat,
};

// ggml.c's type_name for every id it defines; removed ids (4, 5, 31-33, 36-38) have none.
struct TypeName {
  uint32_t id;
  const char* name;
};
constexpr TypeName kTypeNames[] = {
    {0, "f32"},      {1, "f16"},     {2, "q4_0"},     {3, "q4_1"},    {6, "q5_0"},     {7, "q5_1"},
    {8, "q8_0"},     {9, "q8_1"},    {10, "q2_K"},    {11, "q3_K"},   {12, "q4_K"},    {13, "q5_K"},
    {14, "q6_K"},    {15, "q8_K"},   {16, "iq2_xxs"}, {17, "iq2_xs"}, {18, "iq3_xxs"}, {19, "iq1_s"},
    {20, "iq4_nl"},  {21, "iq3_s"},  {22, "iq2_s"},   {23, "iq4_xs"}, {24, "i8"},      {25, "i16"},
    {26, "i32"},     {27, "i64"},    {28, "f64"},     {29, "iq1_m"},  {30, "bf16"},    {34, "tq1_0"},
    {35, "tq2_0"},   {39, "mxfp4"},  {40, "nvfp4"},   {41, "q1_0"},
};

}  // namespace

const WeightFormat* find_weight_format(GgmlType type) {
  for (const WeightFormat* f : kFormats) {
    if (f->type == type) return f;
  }
  return nullptr;
}

const char* ggml_type_name(GgmlType type) {
  const auto id = static_cast<uint32_t>(type);
  for (const TypeName& t : kTypeNames) {
    if (t.id == id) return t.name;
  }
  thread_local char buf[24];  // valid until this thread's next call for an unknown id
  std::snprintf(buf, sizeof(buf), "type%u", id);
  return buf;
}

Result<size_t> row_bytes(GgmlType type, int64_t n) {
  const WeightFormat* f = find_weight_format(type);
  if (f == nullptr) return unsupported(std::string("weight type ") + ggml_type_name(type) + " is not supported");
  if (n < 0) return invalid_argument("negative row length " + std::to_string(n));
  if (n % f->block_elems != 0) {
    return invalid_argument("row length " + std::to_string(n) + " is not a multiple of the " + f->name +
                            " block size " + std::to_string(f->block_elems));
  }
  size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n / f->block_elems), f->block_bytes, &bytes)) {
    return invalid_argument("row of " + std::to_string(n) + " " + f->name + " elements overflows size_t");
  }
  return bytes;
}

}  // namespace vlkv
