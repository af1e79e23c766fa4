#include "gguf/ggml_type_info.h"

#include <limits>
#include <string>

namespace vlkv {
namespace {

using T = GgmlType;

// Sizes as in ggml-common.h (QK_K = 256).
constexpr GgmlTypeInfo kTypes[] = {
    {T::kF32, "f32", 1, 4},
    {T::kF16, "f16", 1, 2},
    {T::kQ4_0, "q4_0", 32, 18},        // f16 d + 16 nibble bytes
    {T::kQ4_1, "q4_1", 32, 20},        // f16 d, m + 16
    {T::kQ5_0, "q5_0", 32, 22},        // f16 d + 4 qh + 16
    {T::kQ5_1, "q5_1", 32, 24},        // f16 d, m + 4 qh + 16
    {T::kQ8_0, "q8_0", 32, 34},        // f16 d + 32
    {T::kQ8_1, "q8_1", 32, 36},        // f16 d, s + 32
    {T::kQ2_K, "q2_K", 256, 84},       // 16 scales + 64 qs + f16 d, dmin
    {T::kQ3_K, "q3_K", 256, 110},      // 32 hmask + 64 qs + 12 scales + f16 d
    {T::kQ4_K, "q4_K", 256, 144},      // f16 d, dmin + 12 scales + 128 qs
    {T::kQ5_K, "q5_K", 256, 176},      // f16 d, dmin + 12 scales + 32 qh + 128 qs
    {T::kQ6_K, "q6_K", 256, 210},      // 128 ql + 64 qh + 16 scales + f16 d
    {T::kQ8_K, "q8_K", 256, 292},      // f32 d + 256 qs + 16 i16 bsums
    {T::kIQ2_XXS, "iq2_xxs", 256, 66},
    {T::kIQ2_XS, "iq2_xs", 256, 74},
    {T::kIQ3_XXS, "iq3_xxs", 256, 98},
    {T::kIQ1_S, "iq1_s", 256, 50},
    {T::kIQ4_NL, "iq4_nl", 32, 18},
    {T::kIQ3_S, "iq3_s", 256, 110},
    {T::kIQ2_S, "iq2_s", 256, 82},
    {T::kIQ4_XS, "iq4_xs", 256, 136},
    {T::kI8, "i8", 1, 1},
    {T::kI16, "i16", 1, 2},
    {T::kI32, "i32", 1, 4},
    {T::kI64, "i64", 1, 8},
    {T::kF64, "f64", 1, 8},
    {T::kIQ1_M, "iq1_m", 256, 56},
    {T::kBF16, "bf16", 1, 2},
    {T::kTQ1_0, "tq1_0", 256, 54},
    {T::kTQ2_0, "tq2_0", 256, 66},
    {T::kMXFP4, "mxfp4", 32, 17},      // e8m0 scale + 16 nibble bytes
    {T::kNVFP4, "nvfp4", 64, 36},      // 4 ue4m3 scales + 32 nibble bytes
    {T::kQ1_0, "q1_0", 128, 18},       // f16 d + 16 sign-bit bytes
};

}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t type_id) {
  for (const GgmlTypeInfo& info : kTypes) {
    if (static_cast<uint32_t>(info.type) == type_id) return &info;
  }
  return nullptr;
}

const GgmlTypeInfo* ggml_type_info(GgmlType type) { return ggml_type_info(static_cast<uint32_t>(type)); }

std::span<const GgmlTypeInfo> ggml_type_infos() { return kTypes; }

Result<uint64_t> ggml_tensor_bytes(GgmlType type, std::span<const int64_t> dims) {
  const GgmlTypeInfo* info = ggml_type_info(type);
  if (!info) return invalid_argument("unknown ggml type id " + std::to_string(static_cast<uint32_t>(type)));
  if (dims.empty()) return invalid_argument("a tensor needs at least one dim");
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d <= 0) return invalid_argument("tensor dim " + std::to_string(d) + " is not positive");
    if (n > std::numeric_limits<int64_t>::max() / d) return invalid_argument("tensor element count overflows");
    n *= d;
  }
  if (dims[0] % info->block_elems != 0) {
    return invalid_argument("row length " + std::to_string(dims[0]) + " is not a multiple of the " +
                            info->name + " block size " + std::to_string(info->block_elems));
  }
  const uint64_t n_blocks = static_cast<uint64_t>(n / info->block_elems);
  if (n_blocks > std::numeric_limits<uint64_t>::max() / info->block_bytes) {
    return invalid_argument("tensor byte count overflows");
  }
  return n_blocks * info->block_bytes;
}

}  // namespace vlkv
