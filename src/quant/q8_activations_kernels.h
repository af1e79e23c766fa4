// The per-tier kernels of quantize_activations_q8 (q8_activations.cpp): one block of 32
// floats to 32 codes rounded half away from zero, the f16-rounded scale and the two
// half-block code sums, the same bits at every tier. Internal to src/quant/.
#pragma once

#include <cstdint>

namespace vlkv {

// As ggml's quantize_row_q8_0: codes use the f32 scale amax / 127, the stored scale is its f16.
inline float q8_block_scale(float amax) { return amax / 127.0f; }

using QuantizeQ8BlockFn = void (*)(const float* xb, int8_t* q, float* d, int32_t* half_sum);
extern const QuantizeQ8BlockFn kQuantizeQ8BlockAvx2;  // q8_activations_x86.cpp
extern const QuantizeQ8BlockFn kQuantizeQ8BlockNeon;  // q8_activations_arm.cpp

}  // namespace vlkv
