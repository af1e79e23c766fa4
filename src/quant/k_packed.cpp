// The packed layout of k_packed.h, portable: each format's block as a list of fields, each
// packed [item][row][width] (small fields) or in 8-byte units with the unit slot order.
#include "quant/k_packed.h"

#include <cstring>
#include <vector>

#include "base/check.h"

namespace vlkv::quant {
namespace {

struct Field {
  int src;      // byte offset in the GGUF block
  int items;    // items per row
  int width;    // bytes per item
  bool units;   // code bytes: rows in kUnitRows order
};

struct PackedFormat {
  size_t block_bytes = 0;
  Field fields[5] = {};
  int n_fields = 0;
};

// Q4_K: d | dmin | scales[12] | qs[128]; Q5_K: d | dmin | scales[12] | qh[32] | qs[128];
// Q6_K: ql[128] | qh[64] | int8 scales[16] | d.
constexpr PackedFormat kQ4_K{144, {{0, 1, 2, false}, {2, 1, 2, false}, {4, 3, 4, false}, {16, 16, 8, true}}, 4};
constexpr PackedFormat kQ5_K{
    176, {{0, 1, 2, false}, {2, 1, 2, false}, {4, 3, 4, false}, {16, 4, 8, true}, {48, 16, 8, true}}, 5};
constexpr PackedFormat kQ6_K{210, {{0, 16, 8, true}, {128, 8, 8, true}, {192, 16, 1, false}, {208, 1, 2, false}}, 4};

const PackedFormat* packed_format(GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_K: return &kQ4_K;
    case GgmlType::kQ5_K: return &kQ5_K;
    case GgmlType::kQ6_K: return &kQ6_K;
    default: return nullptr;
  }
}

// One group's n_blocks super-blocks packed, for one format known at compile time: fixed-width
// copies the compiler inlines (every packed weight passes through this at load).
template <const PackedFormat& PF>
void pack_blocks(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* in = rows + static_cast<size_t>(b) * PF.block_bytes;
#pragma GCC unroll 8
    for (int i = 0; i < PF.n_fields; ++i) {
      const Field& fd = PF.fields[i];
      const auto w = static_cast<size_t>(fd.width);
#pragma GCC unroll 16
      for (int item = 0; item < fd.items; ++item)
#pragma GCC unroll 8
        for (int s = 0; s < kPackRows; ++s, out += w)
          std::memcpy(out, in + static_cast<size_t>(fd.units ? kUnitRows[s] : s) * row_bytes + fd.src + item * w, w);
    }
  }
}

// unpack_row8 for one format known at compile time: fixed-width copies the compiler inlines
// (the prefill GEMM unpacks every packed weight once per call through this).
template <const PackedFormat& PF>
void unpack_blocks(const uint8_t* group, int rr, int64_t b0, int64_t n_blocks, uint8_t* out) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* in = group + static_cast<size_t>(b0 + b) * kPackRows * PF.block_bytes;
    uint8_t* o = out + static_cast<size_t>(b) * PF.block_bytes;
    size_t at = 0;  // the field's first item in the packed block
#pragma GCC unroll 8
    for (int i = 0; i < PF.n_fields; ++i) {
      const Field& fd = PF.fields[i];
      const size_t slot = static_cast<size_t>(fd.units ? kUnitRows[rr] : rr);  // kUnitRows is its own inverse
#pragma GCC unroll 16
      for (int item = 0; item < fd.items; ++item)
        std::memcpy(o + fd.src + item * fd.width, in + at + (static_cast<size_t>(item) * kPackRows + slot) * fd.width,
                    static_cast<size_t>(fd.width));
      at += static_cast<size_t>(fd.items) * kPackRows * fd.width;
    }
  }
}

}  // namespace

bool can_pack_rows8(GgmlType t, int64_t n_rows, int64_t n_cols) {
  return packed_format(t) != nullptr && n_rows > 0 && n_rows % kPackRows == 0 && n_cols > 0 && n_cols % 256 == 0;
}

void pack_rows8(GgmlType t, const uint8_t* src, int64_t n_rows, size_t row_bytes, uint8_t* dst) {
  const PackedFormat* pf = packed_format(t);
  VLKV_CHECK(pf != nullptr && n_rows % kPackRows == 0 && row_bytes % pf->block_bytes == 0);
  const int64_t n_blocks = static_cast<int64_t>(row_bytes / pf->block_bytes);
  for (int64_t g = 0; g < n_rows; g += kPackRows) {
    const uint8_t* rows = src + static_cast<size_t>(g) * row_bytes;
    uint8_t* out = dst + static_cast<size_t>(g) * row_bytes;
    switch (t) {
      case GgmlType::kQ4_K: pack_blocks<kQ4_K>(rows, row_bytes, n_blocks, out); break;
      case GgmlType::kQ5_K: pack_blocks<kQ5_K>(rows, row_bytes, n_blocks, out); break;
      default: pack_blocks<kQ6_K>(rows, row_bytes, n_blocks, out); break;
    }
  }
}

void unpack_row8(GgmlType t, const uint8_t* packed, size_t row_bytes, int64_t row, int64_t b0, int64_t n_blocks,
                 uint8_t* out) {
  const PackedFormat* pf = packed_format(t);
  VLKV_CHECK(pf != nullptr && row >= 0 && b0 >= 0 && n_blocks >= 0 &&
             static_cast<size_t>(b0 + n_blocks) * pf->block_bytes <= row_bytes);
  const uint8_t* group = packed + static_cast<size_t>(row / kPackRows * kPackRows) * row_bytes;
  const int rr = static_cast<int>(row % kPackRows);
  switch (t) {
    case GgmlType::kQ4_K: return unpack_blocks<kQ4_K>(group, rr, b0, n_blocks, out);
    case GgmlType::kQ5_K: return unpack_blocks<kQ5_K>(group, rr, b0, n_blocks, out);
    default: return unpack_blocks<kQ6_K>(group, rr, b0, n_blocks, out);
  }
}

void dot_q8_packed8(const WeightFormat& f, const uint8_t* group, size_t row_bytes, const Q8Activations& x, int64_t n,
                    float* out) {
  const FormatKernels& k = f.kernels();
  if (k.dot_q8_packed8) return k.dot_q8_packed8(group, x, n, out);
  thread_local std::vector<uint8_t> row;  // [row_bytes] one row back in the GGUF layout
  row.resize(row_bytes);
  const int64_t n_blocks = n / f.block_elems;
  for (int r = 0; r < kPackRows; ++r) {
    unpack_row8(f.type, group, row_bytes, r, 0, n_blocks, row.data());
    out[r] = f.dot_q8(row.data(), x, n);
  }
}

bool has_packed8_kernel(const WeightFormat& f) { return f.kernels && f.kernels().dot_q8_packed8 != nullptr; }

}  // namespace vlkv::quant
