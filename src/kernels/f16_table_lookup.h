// Activations looked up in a table indexed by the f16 bits of the input, as ggml's CPU
// gelu / gelu_quick compute them (ops.h): the rounding to f16 and the lookup vectorized
// per SIMD tier (vcvtps2ph + gather on x86); results equal the scalar loop's bit for bit.
#pragma once

#include <cstdint>

namespace vlkv {

// out[i] = table[f16(x[i])] with x rounded to nearest even (table: 65536 floats). With
// gelu_clamp, ggml_vec_gelu_f32's bounds first: x <= -10 gives 0, x >= 10 gives x.
// out may alias x.
using F16TableLookupFn = void (*)(const float* table, const float* x, int64_t n, float* out, bool gelu_clamp);

void f16_table_lookup(const float* table, const float* x, int64_t n, float* out, bool gelu_clamp);

// The scalar reference (also the SIMD variants' tail) and the tier variants
// (f16_table_lookup_x86.cpp).
void f16_table_lookup_scalar(const float* table, const float* x, int64_t n, float* out, bool gelu_clamp);
extern const F16TableLookupFn kF16TableLookupAvx2, kF16TableLookupAvx512;

}  // namespace vlkv
