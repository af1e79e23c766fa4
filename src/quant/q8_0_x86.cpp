// Q8_0's x86 kernels (q8_0.cpp has the layout and the reference): the f32 loops on its
// block decoder, and the 8-bit dots in q8_0_lanes.h's block order at every tier (one row
// is a strided call of one row).
#include "quant/block_layouts.h"
#include "quant/q8_0_lanes.h"
#include "quant/q8_dot_x86.h"

namespace vlkv::quant {
namespace {

struct Traits : Q8_0Layout {
  VLKV_TARGET_AVX2 static void decode(const uint8_t* p, Group32* g) {
    g->q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    g->s0 = g->s1 = half_f16c(p);
    g->b0 = g->b1 = 0.0f;
  }
};

}  // namespace

// min_lane_rows: from how many decode rows one 15-lane pass beats dot_q8_strided passes, one per row
// (matmul_bench DecodeRows 2048x2048, 1 thread: AVX-512 VNNI a lanes pass 0.59-0.75 ms, a
// strided one 0.19-0.26; AVX-VNNI 1.32-1.44 vs 0.25-0.29; AVX2 2.2-2.5 vs 0.25). Both take the
// same per-lane steps, so the choice never changes a result.
const FormatKernels kQ8_0Avx2 = {dequantize_avx2<Traits>, dot_avx2<Traits>, one_row_q8<q8lanes::strided_avx2>,
                                 strided_q8<q8lanes::strided_avx2>, q8lanes::lanes_avx2, 10};
const FormatKernels kQ8_0Avx2Vnni = {dequantize_avx2<Traits>, dot_avx2<Traits>, one_row_q8<q8lanes::strided_avx2vnni>,
                                     strided_q8<q8lanes::strided_avx2vnni>, q8lanes::lanes_avx2vnni, 6};
const FormatKernels kQ8_0Avx512 = {dequantize_avx512<Traits>, dot_avx512<Traits>, one_row_q8<q8lanes::strided_avx2>,
                                   strided_q8<q8lanes::strided_avx2>, q8lanes::lanes_avx2, 10};
const FormatKernels kQ8_0Avx512Vnni = {dequantize_avx512<Traits>, dot_avx512<Traits>,
                                       one_row_q8<q8lanes::strided_avx512vnni>, strided_q8<q8lanes::strided_avx512vnni>,
                                       q8lanes::lanes_avx512vnni, 3};

}  // namespace vlkv::quant
