// K-quant weight rows repacked at load, 8 rows interleaved (Q4_K, Q5_K, Q6_K), so the decode
// matvec reads one stream per 8 rows and each vector load feeds 8 rows' accumulators, whose
// lanes are summed once per activation block instead of a per-row horizontal reduction.
// Layout: a matrix of n_rows (a multiple of 8) rows of row_bytes keeps its size; group g
// (rows 8g..8g+7) takes bytes [8g, 8g + 8) * row_bytes, and in it super-block b (the 8 rows'
// blocks b) takes bytes [8b, 8b + 8) * block_bytes. A packed super-block holds each field of
// the format's block (k_packed.cpp lists them) for the 8 rows in turn:
//   small fields (f16 d, dmin, scale bytes): [item][row][width], rows 0..7 in order;
//   code bytes: 8-byte units [unit][slot][8], unit u = the rows' bytes 8u..8u+7, slot s = row
//   kUnitRows[s] (rows 0, 1, 4, 5 then 2, 3, 6, 7: a 256-bit half holds 4 rows, two int32
//   lanes each, and _mm256_hadd_epi32 of the halves gives rows 0..7 in order).
// The decode kernel takes the block steps of k_strided.h, so it equals dot_q8 bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/gguf_types.h"
#include "quant/q8_activations.h"
#include "quant/weight_format.h"

namespace vlkv::quant {

inline constexpr int kPackRows = 8;
inline constexpr int kUnitRows[kPackRows] = {0, 1, 4, 5, 2, 3, 6, 7};

// Whether a matrix of format t and shape n_rows x n_cols can take the packed layout
// (Q4_K / Q5_K / Q6_K, n_rows % 8 == 0, whole super-blocks).
bool can_pack_rows8(GgmlType t, int64_t n_rows, int64_t n_cols);

// src: n_rows GGUF rows of row_bytes; dst: the same bytes packed (not overlapping src).
void pack_rows8(GgmlType t, const uint8_t* src, int64_t n_rows, size_t row_bytes, uint8_t* dst);

// Super-blocks [b0, b0 + n_blocks) of row `row` of a packed matrix, back in the GGUF layout:
// out [n_blocks * block_bytes]. unpack of pack is the identity, byte for byte.
void unpack_row8(GgmlType t, const uint8_t* packed, size_t row_bytes, int64_t row, int64_t b0, int64_t n_blocks,
                 uint8_t* out);

// out[r] = f.dot_q8(row 8g + r, x, n) bit for bit for the 8 rows of the packed group at
// `group` (row_bytes each): the tier's packed kernel, or unpacked rows through dot_q8 where
// the tier has none (scalar, ARM).
void dot_q8_packed8(const WeightFormat& f, const uint8_t* group, size_t row_bytes, const Q8Activations& x, int64_t n,
                    float* out);

// Whether the current tier has a packed kernel for format f (else packing only costs).
bool has_packed8_kernel(const WeightFormat& f);

}  // namespace vlkv::quant
