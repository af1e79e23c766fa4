// The table of GGUF weight formats we can read. Each format (or family of formats)
// lives in src/quant/<type>.cpp with a scalar reference dequantize/quantize and a
// fast dot path with run-time SIMD dispatch; block layouts match ggml bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/gguf_types.h"
#include "quant/q8_activations.h"
#include "vlkv/status.h"

namespace vlkv {

// One SIMD tier's kernels of a format (entries as WeightFormat's fast paths below). Each
// format fills one SimdTable of them (base/simd_dispatch.h): the scalar variant in
// src/quant/<type>.cpp, the x86 ones in <type>_x86.cpp, the ARM ones in <type>_arm.cpp.
struct FormatKernels {
  void (*dequantize_row)(const void* src, float* dst, int64_t n);
  float (*dot)(const void* row, const float* x, int64_t n);
  float (*dot_q8)(const void* row, const Q8Activations& x, int64_t n) = nullptr;
  void (*dot_q8_strided)(const void* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n,
                         float* out) = nullptr;
  void (*dot_q8_lanes)(const void* const* rows, int n_rows, const Q8Lanes& x, int64_t n, float* out) = nullptr;
  // Decode rows from which matmul multiplies through dot_q8_lanes rather than one
  // dot_q8_strided pass per row (kernels/matmul.cpp); 0: this tier's lane kernels are loops
  // over dot_q8, so matmul calls dot_q8 directly.
  int min_lane_rows = 0;
  // Optional (quant/k_packed.h): out[r] = dot_q8 of row r of the 8-row packed group at `group`
  // (rows of n weights), r < 8, bit for bit.
  void (*dot_q8_packed8)(const void* group, const Q8Activations& x, int64_t n, float* out) = nullptr;
};

struct WeightFormat {
  GgmlType type;
  const char* name;       // ggml's name: "f32", "q4_K", ...
  int64_t block_elems;    // elements per block (1 for f32/f16/bf16, 32, or 256 for K-quants)
  size_t block_bytes;     // bytes per block

  // Scalar reference: n must be a multiple of block_elems.
  void (*dequantize_row_ref)(const void* src, float* dst, int64_t n);
  // Scalar reference quantizer (round-to-nearest as ggml's reference *_ref functions);
  // used by tests and by tools that write GGUF files.
  void (*quantize_row_ref)(const float* src, void* dst, int64_t n);

  // Fast paths: each calls the current tier's FormatKernels entry (kernels() below).
  void (*dequantize_row)(const void* src, float* dst, int64_t n);
  // sum_i row[i] * x[i] with x in f32 (no activation rounding): exact-dequantize-then-f32 semantics.
  float (*dot)(const void* row, const float* x, int64_t n);
  // Optional (null for f32/f16/bf16): sum_i row[i] * x[i] with x pre-rounded to 8-bit blocks
  // (Q8Activations), by integer multiply-adds — llama.cpp's CPU semantics, several times
  // less compute per weight byte than the f32 path.
  float (*dot_q8)(const void* row, const Q8Activations& x, int64_t n) = nullptr;
  // Optional (a decode matvec): out[r] = dot_q8(base + r * stride, x, n) bit for bit for
  // r < n_rows <= kLaneRows + 1 (stride 0: one row), several rows per pass where the CPU has it.
  void (*dot_q8_strided)(const void* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n,
                         float* out) = nullptr;
  // Optional (a batched step's decode rows): out[i * (kLaneRows + 1) + l] = dot_q8(rows[i], *x.rows[l], n)
  // bit for bit for i < n_rows <= kMaxLaneWeightRows, l < x.n_rows; each activation vector
  // loaded serves every weight row. Without the CPU's kernel, pair by pair.
  void (*dot_q8_lanes)(const void* const* rows, int n_rows, const Q8Lanes& x, int64_t n, float* out) = nullptr;
  // The kernels of the current SIMD tier (what the fast paths above call).
  const FormatKernels& (*kernels)() = nullptr;
};

inline constexpr int kMaxLaneWeightRows = 8;

// nullptr if the type is not one we implement.
const WeightFormat* find_weight_format(GgmlType type);
// Name of any ggml type id (also ones we do not implement), "type<N>" if unknown.
const char* ggml_type_name(GgmlType type);
// Bytes of a row of n elements; error if n is not a multiple of the block size
// or the type is unsupported. Overflow-checked.
Result<size_t> row_bytes(GgmlType type, int64_t n);

}  // namespace vlkv
