// Block geometry of every ggml tensor type id (also the ones we cannot compute
// with), so the GGUF reader can validate tensor sizes and `vlkv info` can list them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "gguf/gguf_types.h"
#include "vlkv/status.h"

namespace vlkv {

struct GgmlTypeInfo {
  GgmlType type;
  const char* name;      // ggml's spelling: "f32", "q4_K", "iq2_xxs", ...
  int64_t block_elems;   // elements per block (1 for plain types)
  uint64_t block_bytes;  // bytes per block
};

// nullptr for an id ggml does not define (or has removed).
const GgmlTypeInfo* ggml_type_info(GgmlType type);
const GgmlTypeInfo* ggml_type_info(uint32_t type_id);
// Every known type, in id order.
std::span<const GgmlTypeInfo> ggml_type_infos();

// Bytes of a tensor with these dims (ggml order, dims[0] contiguous). InvalidArgument
// if the type is unknown, a dim is not positive, dims[0] is not a multiple of the
// block size, or the element or byte count overflows.
Result<uint64_t> ggml_tensor_bytes(GgmlType type, std::span<const int64_t> dims);

}  // namespace vlkv
