// AVX2 (+FMA, F16C) variant of the f32 / f16 fused kernels (float_kernels.h).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "base/simd_dispatch.h"
#include "kv/codec.h"
#include "kv/codecs/float_hsum_x86.h"
#include "kv/codecs/float_kernels.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX2)
namespace vlkv::float_kernels {
namespace {

// ---------------- AVX2 + FMA + F16C ----------------

template <class Elem>
inline __m256 load8(const Elem* x) {
  if constexpr (std::is_same_v<Elem, float>) return _mm256_loadu_ps(x);
  else return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
}


template <class Elem>
void scores_fallback(const float* q, int n_q, const SegmentView& s, float scale, float* logits, int64_t ld) {
  const int d = s.head_dim, d8 = d & ~7;
  for (int64_t t0 = 0; t0 < s.n_tokens;) {
    const int64_t n = s.contiguous_blocks(t0);
    const Elem* rows = reinterpret_cast<const Elem*>(s.block(t0));  // [n, head_dim]
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {  // 4 key rows per pass: each q load feeds 4 FMAs
      const Elem* k0 = rows + j * d;
      const Elem *k1 = k0 + d, *k2 = k1 + d, *k3 = k2 + d;
      for (int r = 0; r < n_q; ++r) {
        const float* qr = q + r * d;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int i = 0; i < d8; i += 8) {
          const __m256 qv = _mm256_loadu_ps(qr + i);
          a0 = _mm256_fmadd_ps(qv, load8(k0 + i), a0);
          a1 = _mm256_fmadd_ps(qv, load8(k1 + i), a1);
          a2 = _mm256_fmadd_ps(qv, load8(k2 + i), a2);
          a3 = _mm256_fmadd_ps(qv, load8(k3 + i), a3);
        }
        float s0 = hsum8(a0), s1 = hsum8(a1), s2 = hsum8(a2), s3 = hsum8(a3);
        for (int i = d8; i < d; ++i) {
          s0 += qr[i] * to_f32(k0[i]); s1 += qr[i] * to_f32(k1[i]);
          s2 += qr[i] * to_f32(k2[i]); s3 += qr[i] * to_f32(k3[i]);
        }
        float* lr = logits + r * ld + t0 + j;
        lr[0] = s0 * scale; lr[1] = s1 * scale; lr[2] = s2 * scale; lr[3] = s3 * scale;
      }
    }
    for (; j < n; ++j) {
      const Elem* k0 = rows + j * d;
      for (int r = 0; r < n_q; ++r) {
        const float* qr = q + r * d;
        __m256 a0 = _mm256_setzero_ps();
        for (int i = 0; i < d8; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qr + i), load8(k0 + i), a0);
        float s0 = hsum8(a0);
        for (int i = d8; i < d; ++i) s0 += qr[i] * to_f32(k0[i]);
        logits[r * ld + t0 + j] = s0 * scale;
      }
    }
    t0 += n;
  }
}

template <class Elem>
void accumulate_fallback(const float* p, int64_t ld, int n_q, const SegmentView& s, float* out) {
  const int d = s.head_dim, d8 = d & ~7;
  for (int64_t t0 = 0; t0 < s.n_tokens;) {
    const int64_t n = s.contiguous_blocks(t0);
    const Elem* rows = reinterpret_cast<const Elem*>(s.block(t0));  // [n, head_dim]
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {  // 4 value rows per pass: one load/store of out per 4 FMAs
      const Elem* v0 = rows + j * d;
      const Elem *v1 = v0 + d, *v2 = v1 + d, *v3 = v2 + d;
      for (int r = 0; r < n_q; ++r) {
        const float* pr = p + r * ld + t0 + j;
        const __m256 w0 = _mm256_set1_ps(pr[0]), w1 = _mm256_set1_ps(pr[1]);
        const __m256 w2 = _mm256_set1_ps(pr[2]), w3 = _mm256_set1_ps(pr[3]);
        float* o = out + r * d;
        for (int i = 0; i < d8; i += 8) {
          __m256 acc = _mm256_loadu_ps(o + i);
          acc = _mm256_fmadd_ps(w0, load8(v0 + i), acc);
          acc = _mm256_fmadd_ps(w1, load8(v1 + i), acc);
          acc = _mm256_fmadd_ps(w2, load8(v2 + i), acc);
          acc = _mm256_fmadd_ps(w3, load8(v3 + i), acc);
          _mm256_storeu_ps(o + i, acc);
        }
        for (int i = d8; i < d; ++i)
          o[i] += pr[0] * to_f32(v0[i]) + pr[1] * to_f32(v1[i]) + pr[2] * to_f32(v2[i]) + pr[3] * to_f32(v3[i]);
      }
    }
    for (; j < n; ++j) {
      const Elem* v0 = rows + j * d;
      for (int r = 0; r < n_q; ++r) {
        const float w = p[r * ld + t0 + j];
        const __m256 w0 = _mm256_set1_ps(w);
        float* o = out + r * d;
        for (int i = 0; i < d8; i += 8) _mm256_storeu_ps(o + i, _mm256_fmadd_ps(w0, load8(v0 + i), _mm256_loadu_ps(o + i)));
        for (int i = d8; i < d; ++i) o[i] += w * to_f32(v0[i]);
      }
    }
    t0 += n;
  }
}

// AVX2 blocked kernels (d % 8 == 0): scores 2 rows x 4 keys (8 ymm accumulators, one
// hadd tree); accumulate up to 4 rows x 16 channels in registers per 64-token sub-block.

// 8 vectors -> one vector whose element i is the sum of v[i].
inline __m256 reduce_8(const __m256* v) {
  const __m256 h01 = _mm256_hadd_ps(v[0], v[1]), h23 = _mm256_hadd_ps(v[2], v[3]);
  const __m256 h45 = _mm256_hadd_ps(v[4], v[5]), h67 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 a = _mm256_hadd_ps(h01, h23), b = _mm256_hadd_ps(h45, h67);
  return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

template <class Elem, int RB>  // RB = 1 or 2 rows
void scores_rows(const float* q, int d, const Elem* rows, int64_t n, float scale, float* lr,
                                int64_t ld) {
  const __m256 vscale = _mm256_set1_ps(scale);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const Elem* k0 = rows + j * d;
    __m256 acc[8];
    for (int x = 0; x < 8; ++x) acc[x] = _mm256_setzero_ps();
    for (int i = 0; i < d; i += 8) {
      const __m256 ka[4] = {load8(k0 + i), load8(k0 + d + i), load8(k0 + 2 * d + i), load8(k0 + 3 * d + i)};
      for (int b = 0; b < RB; ++b) {
        const __m256 qv = _mm256_loadu_ps(q + b * d + i);
        for (int a = 0; a < 4; ++a) acc[4 * b + a] = _mm256_fmadd_ps(qv, ka[a], acc[4 * b + a]);
      }
    }
    const __m256 sums = _mm256_mul_ps(reduce_8(acc), vscale);  // element 4*row + key
    _mm_storeu_ps(lr + j, _mm256_castps256_ps128(sums));
    if constexpr (RB == 2) _mm_storeu_ps(lr + ld + j, _mm256_extractf128_ps(sums, 1));
  }
  for (; j < n; ++j) {
    const Elem* k0 = rows + j * d;
    for (int b = 0; b < RB; ++b) {
      __m256 a0 = _mm256_setzero_ps();
      for (int i = 0; i < d; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + b * d + i), load8(k0 + i), a0);
      lr[b * ld + j] = hsum8(a0) * scale;
    }
  }
}

struct VecOps {
  using V = __m256;
  static constexpr int kLanes = 8, kMaxVecs = 2, kScoreRows = 2, kDimMultiple = 8;
  template <class Elem>
  static V load(const Elem* x) { return load8(x); }
  static V loadf(const float* x) { return _mm256_loadu_ps(x); }
  static void storef(float* x, V v) { _mm256_storeu_ps(x, v); }
  static V splat(const float* x) { return _mm256_broadcast_ss(x); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
};

#include "kv/codecs/float_kernel_loops.inc"

}  // namespace

const FloatKernels kFloatKernelsAvx2 = float_kernel_table();

}  // namespace vlkv::float_kernels
VLKV_TARGET_END
