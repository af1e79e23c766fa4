// The AVX-512 VNNI variant of IntRowKernels (int_row_kernels.h): 16-lane dequantization and
// scores on rows layouts of 2/4-bit codes in place — 16 tokens per pass, one per 32-bit lane
// (dword gathers at the block stride), 24-bit query dots with vpdpbusd (int_kernels_avx512.h).
// Every header is included above the target region (base/simd_dispatch.h says why).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/simd_dispatch.h"
#include "kv/codecs/int_pack.h"
#include "kv/codecs/int_row_kernels.h"
#include "kv/codecs/int_tiles.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX512_VNNI)
#include "kv/codecs/int_kernels_avx512.h"
#include "kv/codecs/int_unpack_x86.h"
#include "kv/codecs/int_row_dequant_avx512.h"

namespace vlkv::intk {
namespace {

// One thread's prepared queries: [n_q] rows of hi/mid/lo bytes and steps, the per-group
// (per token) or per-row (per channel) sums that carry the mins, and a block's metadata.
struct Prep {
  std::vector<int8_t> hi, lo, mid;  // [n_q, d]
  std::vector<float> step;          // [n_q, d / 16]
  std::vector<float> sumq;          // per token: [n_q, n_groups]; per channel: [n_q] sum q_c m_c
  std::vector<float> sc, mn;        // per channel: the block's scale / min as floats
  PrepRow row(int r, int d) {
    return {hi.data() + static_cast<size_t>(r) * d, lo.data() + static_cast<size_t>(r) * d,
            mid.data() + static_cast<size_t>(r) * d, step.data() + static_cast<size_t>(r) * (d / 16)};
  }
};

Prep& prep_for(int n_q, int d) {
  thread_local Prep p;  // grows once per thread, never per call
  const size_t n = static_cast<size_t>(n_q) * d;
  if (p.hi.size() < n) {
    p.hi.resize(n);
    p.lo.resize(n);
    p.mid.resize(n);
    p.step.resize(n / 16);
    p.sumq.resize(n);
  }
  if (p.sc.size() < static_cast<size_t>(d)) {
    p.sc.resize(d);
    p.mn.resize(d);
  }
  return p;
}

// Up to 16 tokens at base + t * stride, rows [r0, r0 + RB) of pr; ng > 0: per-token blocks
// (ng groups: f16 scales, f16 mins, codes), else per-channel code rows.
template <int B, int RB>
void tokens_rb(const uint8_t* base, int64_t stride, int nt, int ng, int r0, int d, Prep& pr, float scale, float* lg,
               int64_t ld) {
  const __mmask16 m = static_cast<__mmask16>((1u << nt) - 1);
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(static_cast<int32_t>(stride)));
  PrepRow rows[RB];
  for (int r = 0; r < RB; ++r) rows[r] = pr.row(r0 + r, d);
  __m512 out[RB];
  if (ng == 0) {
    for (int r = 0; r < RB; ++r) out[r] = _mm512_set1_ps(pr.sumq[r0 + r]);
    dot_units<B, RB>(base, idx, m, 0, d / 16, rows, out);
  } else {
    const int upg = d / ng / 16;
    const uint8_t* codes = base + 4 * ng;
    for (int r = 0; r < RB; ++r) out[r] = _mm512_setzero_ps();
    for (int k = 0; k < ng; ++k) {
      __m512 acc[RB];
      for (int r = 0; r < RB; ++r) acc[r] = _mm512_setzero_ps();
      dot_units<B, RB>(codes, idx, m, k * upg, (k + 1) * upg, rows, acc);
      const __m512 s = gather_half(base + 2 * k, idx, m);
      const __m512 z = gather_half(base + 2 * ng + 2 * k, idx, m);
      for (int r = 0; r < RB; ++r)
        out[r] = _mm512_fmadd_ps(acc[r], s,
                                 _mm512_fmadd_ps(z, _mm512_set1_ps(pr.sumq[static_cast<size_t>(r0 + r) * ng + k]), out[r]));
    }
  }
  for (int r = 0; r < RB; ++r)
    _mm512_mask_storeu_ps(lg + static_cast<int64_t>(r0 + r) * ld, m, _mm512_mul_ps(out[r], _mm512_set1_ps(scale)));
}

template <int B>
void tokens(const uint8_t* base, int64_t stride, int nt, int ng, int rb_n, int r0, int d, Prep& pr, float scale,
            float* lg, int64_t ld) {
  switch (rb_n) {
    case 4: return tokens_rb<B, 4>(base, stride, nt, ng, r0, d, pr, scale, lg, ld);
    case 3: return tokens_rb<B, 3>(base, stride, nt, ng, r0, d, pr, scale, lg, ld);
    case 2: return tokens_rb<B, 2>(base, stride, nt, ng, r0, d, pr, scale, lg, ld);
    default: return tokens_rb<B, 1>(base, stride, nt, ng, r0, d, pr, scale, lg, ld);
  }
}

template <int B>
void scores_rows(const float* q, int n_q, const SegmentView& seg, const IntRowShape& sh, float scale, float* logits,
                 int64_t ld) {
  const int d = sh.d;
  Prep& pr = prep_for(n_q, d);
  if (sh.G) {  // per channel: q'_c = q_c * scale_c folded per block, sum_c q_c min_c added
    const int G = sh.G;
    const int64_t rb = intq::row_bytes(d, B);
    for (int64_t b = 0; b < seg.n_blocks(); ++b) {
      const uint8_t* block = seg.block(b);
      intq::halves_to_floats_f16c(block, d, pr.sc.data());
      intq::halves_to_floats_f16c(block + 2 * d, d, pr.mn.data());
      for (int r = 0; r < n_q; ++r)
        pr.sumq[r] = prep_row(q + static_cast<size_t>(r) * d, pr.sc.data(), pr.mn.data(), d, pr.row(r, d));
      for (int r0 = 0; r0 < n_q; r0 += 4) {
        const int rb_n = std::min(4, n_q - r0);
        for (int j = 0; j < G; j += 16)
          tokens<B>(block + 4 * d + j * rb, rb, std::min(16, G - j), 0, rb_n, r0, d, pr, scale, logits + b * G + j,
                    ld);
      }
    }
    return;
  }
  const int ng = sh.ng, g = d / ng;
  for (int r = 0; r < n_q; ++r) {
    prep_row(q + static_cast<size_t>(r) * d, nullptr, nullptr, d, pr.row(r, d));
    for (int k = 0; k < ng; ++k) {
      float s = 0.0f;
      for (int i = 0; i < g; ++i) s += q[static_cast<size_t>(r) * d + k * g + i];
      pr.sumq[static_cast<size_t>(r) * ng + k] = s;
    }
  }
  const int64_t bb = seg.block_bytes;
  for (int64_t t0 = 0; t0 < seg.n_tokens;) {
    const int64_t n = seg.contiguous_blocks(t0);
    const uint8_t* base = seg.block(t0);
    for (int r0 = 0; r0 < n_q; r0 += 4) {
      const int rb_n = std::min(4, n_q - r0);
      for (int64_t j = 0; j < n; j += 16)
        tokens<B>(base + j * bb, bb, static_cast<int>(std::min<int64_t>(16, n - j)), ng, rb_n, r0, d, pr, scale,
                  logits + t0 + j, ld);
    }
    t0 += n;
  }
}

}  // namespace

const IntRowKernels kIntRowKernelsAvx512Vnni{
    .dequantize = {dequantize_avx512<2>, dequantize_avx512<3>, dequantize_avx512<4>, dequantize_avx512<8>},
    .halves_to_floats = intq::halves_to_floats_f16c,
    .scores = {scores_rows<2>, scores_rows<4>}};

}  // namespace vlkv::intk
VLKV_TARGET_END
