// Dispatch table (base/simd_dispatch.h) of the VidKV codecs' kernels (sign1c, mixk,
// ternary; sign1_codecs.h): bit-plane scores and sums, mixk's per-block row weights and
// query split, the dense real-FFT product, and the ternary tile kernels. One variant per
// SIMD tier, the kernels of each ISA in their own files (sign1_planes_<isa>.cpp,
// mixk_kernels_<isa>.cpp, real_fft_kernels_<isa>.cpp, ternary_tiles_<isa>.cpp); the scalar
// variant is the reference. Internal to codecs/.
#pragma once

#include <cstdint>

#include "base/cpu_features.h"
#include "kv/methods/vidkv/ternary_tiles.h"

namespace vlkv::sign1 {

struct Sign1Kernels {
  // lg[r * ld + t] = scale * (base[r] + sum_j w[r * n_planes + j] * bit_j(t)), r < n_rows
  // (sign1_planes.h).
  void (*plane_scores_rows)(const uint8_t* planes, int n_planes, int group, const float* w, const float* base,
                            int n_rows, float scale, float* lg, int64_t ld);
  // plane_scores_rows over mixk's planes: n_out low, n_out high (w[r, n_out + j] =
  // 2 w[r, j], as mixk's row weights give), n_sign sign planes; null: plane_scores_rows.
  void (*mixk_plane_scores_rows)(const uint8_t* planes, int n_out, int n_sign, int group, const float* w,
                                 const float* base, int n_rows, float scale, float* lg, int64_t ld);
  // u[j] = sum_t p[t] * bit_j(t).
  void (*plane_sums)(const uint8_t* planes, int n_planes, int group, const float* p, float* u);
  // mixk per block and query row (mixk_kernels.h).
  void (*mixk_row_weights)(const float* qo, const float* qc, const float* os, const float* sig, int n_out, int nc,
                           float* w, float* base);
  void (*mixk_split_query)(const float* q, const uint8_t* mask, int d, float* qo, float* qn);
  // out[0, n) = sum_r in[r] * m[r * n + 0, n) (real_fft_kernels.h).
  void (*fft_axpy_rows)(const float* in, const float* m, int n, float* out);
  // Eight real FFTs in SIMD lanes (real_fft_kernels.h); null: RealFft's per-vector path.
  void (*fft_forward_batch8)(const float* x, int64_t x_stride, int n, const float* twr, const float* twi,
                             const int* bitrev, float* c, int64_t c_stride);
  // Ternary tiles (ternary_tiles.h); null at the scalar tier, whose codec reads digits.
  void (*ternary_decode)(const uint8_t* trits, const ternt::TritOrder& o, int8_t* codes);
  bool (*ternary_accum)(const float* p, const int8_t* codes, const ternt::TritOrder& o, const float* sig, float* out);
  void (*ternary_scores)(const float* qs, const int8_t* codes, const ternt::TritOrder& o, float scale, float* lr);
  // Ternary row-ordered blocks, on codes unpacked by table; null at the scalar tier.
  void (*ternary_row_scores)(const float* qs, const int8_t* codes, int G, int d, float scale, float* lr);
  void (*ternary_row_accum)(const float* p, const int8_t* codes, int G, int d, const float* sig, float* out);
  // out[0, n) = the n byte-packed halves at p (exact at every tier; sign1_planes.h).
  void (*load_f16_row)(const uint8_t* p, int n, float* out);
};

// The tier variants (sign1_kernels_x86.cpp); the scalar one is in sign1_kernels.cpp.
extern const Sign1Kernels kSign1Avx2, kSign1Avx2Vnni, kSign1Avx512, kSign1Avx512Vnni, kSign1Avx512Vbmi;
extern const Sign1Kernels kSign1Neon, kSign1Dotprod;  // sign1_kernels_arm.cpp

// The variant of the current tier, and of any tier (tests).
const Sign1Kernels& sign1_kernels();
const Sign1Kernels& sign1_kernels_at(SimdTier tier);

}  // namespace vlkv::sign1
