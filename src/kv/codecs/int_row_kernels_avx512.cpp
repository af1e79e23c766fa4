// The AVX-512 (F, BW, DQ, VL; no VNNI) variant of IntRowKernels (int_row_kernels.h): 16-lane
// dequantization; scores on the codes in place need VNNI (int_row_kernels_avx512vnni.cpp).
// Every header is included above the target region (base/simd_dispatch.h says why).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "base/simd_dispatch.h"
#include "kv/codecs/int_row_kernels.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX512)
#include "kv/codecs/int_unpack_x86.h"
#include "kv/codecs/int_row_dequant_avx512.h"

namespace vlkv::intk {

const IntRowKernels kIntRowKernelsAvx512{
    .dequantize = {dequantize_avx512<2>, dequantize_avx512<3>, dequantize_avx512<4>, dequantize_avx512<8>},
    .halves_to_floats = intq::halves_to_floats_f16c,
    .scores = {}};

}  // namespace vlkv::intk
VLKV_TARGET_END
