// AVX2 kernels of the ternary codec's tiled blocks: decode by byte compares, accumulate
// as llama.cpp's AVX2 q8 dots (maddubs: u8 p x s8 code, pairs summed to s16; s16 sums
// over the block's quads, |sum| <= 2 * 255 * G/4 <= 32640 for G <= 256, so no
// saturation; one madd by ones widens to s32 per channel).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "base/simd_dispatch.h"
#include "kv/methods/vidkv/ternary_tiles.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX2)
#include "kv/methods/vidkv/ternary_tiles_x86.h"

namespace vlkv::ternt {
namespace {

struct DotAvx2 {
  static __m256i add(__m256i acc, __m256i p, __m256i codes) { return _mm256_add_epi16(acc, _mm256_maddubs_epi16(p, codes)); }
  static __m256i finish(__m256i acc) { return _mm256_madd_epi16(acc, _mm256_set1_epi16(1)); }
};

}  // namespace

void decode_tiles_avx2(const uint8_t* trits, const TritOrder& o, int8_t* codes) {
  for (int ch = 0; ch < o.n_full; ++ch) {
    const uint8_t* src = trits + 64 * ch;
    int8_t* dst = codes + 320 * ch;  // groups 5 ch .. 5 ch + 4, 64 codes each
    decode32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)), dst);
    decode32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32)), dst + 32);
  }
  decode_tail(trits, o, codes);
}

bool accum_tiles_avx2(const float* p, const int8_t* codes, const TritOrder& o, const float* sig, float* out) {
  return accum_tiles_impl<DotAvx2>(p, codes, o, sig, out);
}

// Per unit (16 channels) and quad j, the 64 codes are 8 vectors of 2 channels x 4 tokens:
// acc[j] += {q_c x4, q_c+1 x4} * codes, then the two channel slots of acc[j] add up to
// the quad's 4 logits.
void tile_scores_avx2(const float* qs, const int8_t* codes, const TritOrder& o, float scale, float* lr) {
  const int nj = o.G / 4, nu = o.d / 16;
  alignas(32) float acc[64][8];  // [quad][slot * 4 + token], nj <= 64
  for (int j = 0; j < nj; ++j) _mm256_store_ps(acc[j], _mm256_setzero_ps());
  const __m256i lo4 = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  for (int u = 0; u < nu; ++u) {
    __m256 qp[8];  // qp[m] = {q[16u + 2m] x4, q[16u + 2m + 1] x4}
    for (int h = 0; h < 2; ++h) {
      const __m256 q8 = _mm256_loadu_ps(qs + 16 * u + 8 * h);
      for (int m = 0; m < 4; ++m)
        qp[4 * h + m] = _mm256_permutevar8x32_ps(q8, _mm256_add_epi32(lo4, _mm256_set1_epi32(2 * m)));
    }
    for (int j = 0; j < nj; ++j) {
      const int8_t* c = codes + 64 * (static_cast<int64_t>(u) * nj + j);
      __m256 a0 = _mm256_load_ps(acc[j]), a1 = _mm256_setzero_ps();
      for (int m = 0; m < 8; m += 2) {
        const __m256 c0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c + 8 * m))));
        const __m256 c1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c + 8 * m + 8))));
        a0 = _mm256_fmadd_ps(qp[m], c0, a0);
        a1 = _mm256_fmadd_ps(qp[m + 1], c1, a1);
      }
      _mm256_store_ps(acc[j], _mm256_add_ps(a0, a1));
    }
  }
  const __m128 sc = _mm_set1_ps(scale);
  for (int j = 0; j < nj; ++j) {
    const __m256 a = _mm256_load_ps(acc[j]);
    _mm_storeu_ps(lr + 4 * j, _mm_mul_ps(_mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1)), sc));
  }
}

}  // namespace vlkv::ternt
VLKV_TARGET_END
