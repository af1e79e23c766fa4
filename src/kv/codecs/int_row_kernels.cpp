#include "kv/codecs/int_row_kernels.h"

#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "base/simd_dispatch.h"
#include "kv/codecs/int_pack.h"

namespace vlkv::intk {
namespace {

inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

void dequantize_scalar(const IntRowMeta& m, int d, int bits, float* out) {
  uint8_t codes[1024];  // head_dim <= 1024 (IntCodec::check_head_dim)
  intq::unpack_row(m.codes, d, bits, codes);
  for (int i = 0; i < d; ++i) {
    const float s = m.scale_c ? m.scale_c[i] : half_at(m.scale_h + 2 * (i / m.g));
    const float z = m.scale_c ? m.min_c[i] : half_at(m.min_h + 2 * (i / m.g));
    out[i] = std::fma(static_cast<float>(codes[i]), s, z);
  }
}

template <int B>
void dequantize_scalar_b(const IntRowMeta& m, int d, float* out) {
  dequantize_scalar(m, d, B, out);
}

void halves_to_floats_scalar(const uint8_t* h, int d, float* out) {
  for (int i = 0; i < d; ++i) out[i] = half_at(h + 2 * i);
}

}  // namespace

const IntRowKernels kIntRowKernelsScalar{
    .dequantize = {dequantize_scalar_b<2>, dequantize_scalar_b<3>, dequantize_scalar_b<4>, dequantize_scalar_b<8>},
    .halves_to_floats = halves_to_floats_scalar,
    .scores = {}};

const IntRowKernels& int_row_kernels() {
  static const SimdTable<IntRowKernels> table(
      VLKV_SIMD_VARIANTS(&kIntRowKernelsScalar, kIntRowKernels, avx2, avx512, avx512_vnni, neon));
  return table.get();
}

}  // namespace vlkv::intk
