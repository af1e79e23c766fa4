// Fused scores/accumulate for codecs that store each token as head_dim plain floats
// (f32) or IEEE halves (f16): one block = one token row. Scalar reference plus
// AVX2 and AVX-512 paths, chosen per call by simd_level(). Internal to codecs/.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "kv/codec.h"

namespace vlkv::float_kernels {

// Elem: float (f32 codec) or uint16_t (f16 codec: IEEE half bits).
template <class Elem>
inline float to_f32(Elem x) {
  if constexpr (std::is_same_v<Elem, float>) return x;
  else return fp16_to_fp32(x);
}

// ---------------- scalar reference ----------------
template <class Elem>
void scores_scalar(const float* q, int n_q, const SegmentView& s, float scale, float* logits, int64_t ld) {
  const int d = s.head_dim;
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    const Elem* k = reinterpret_cast<const Elem*>(s.block(t));  // [head_dim]
    for (int r = 0; r < n_q; ++r) {
      float acc = 0.0f;
      for (int i = 0; i < d; ++i) acc += q[r * d + i] * to_f32(k[i]);
      logits[r * ld + t] = acc * scale;
    }
  }
}

template <class Elem>
void accumulate_scalar(const float* p, int64_t ld, int n_q, const SegmentView& s, float* out) {
  const int d = s.head_dim;
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    const Elem* v = reinterpret_cast<const Elem*>(s.block(t));  // [head_dim]
    for (int r = 0; r < n_q; ++r) {
      const float w = p[r * ld + t];
      for (int i = 0; i < d; ++i) out[r * d + i] += w * to_f32(v[i]);
    }
  }
}

// ---------------- AVX2 + FMA + F16C ----------------
#define VLKV_AVX2 __attribute__((target("avx2,fma,f16c")))

template <class Elem>
VLKV_AVX2 inline __m256 load8(const Elem* x) {
  if constexpr (std::is_same_v<Elem, float>) return _mm256_loadu_ps(x);
  else return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
}

VLKV_AVX2 inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <class Elem>
VLKV_AVX2 void scores_avx2(const float* q, int n_q, const SegmentView& s, float scale, float* logits, int64_t ld) {
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
VLKV_AVX2 void accumulate_avx2(const float* p, int64_t ld, int n_q, const SegmentView& s, float* out) {
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

// ---------------- AVX-512 F/BW/DQ/VL ----------------
#define VLKV_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")))

template <class Elem>
VLKV_AVX512 inline __m512 load16(const Elem* x, __mmask16 m) {
  if constexpr (std::is_same_v<Elem, float>) return _mm512_maskz_loadu_ps(m, x);
  else return _mm512_maskz_cvtph_ps(m, _mm256_maskz_loadu_epi16(m, x));
}

// Horizontal sum. (Built from maskz intrinsics: GCC 12's _mm512_reduce_add_ps and
// _mm512_cvtph_ps trip -Wmaybe-uninitialized inside its own headers.)
VLKV_AVX512 inline float hsum16(__m512 v) {
  const __m512d x = _mm512_castps_pd(v);
  const __m256 lo = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, x, 0));
  const __m256 hi = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, x, 1));
  return hsum8(_mm256_add_ps(lo, hi));
}

template <class Elem>
VLKV_AVX512 void scores_avx512(const float* q, int n_q, const SegmentView& s, float scale, float* logits,
                               int64_t ld) {
  const int d = s.head_dim;
  for (int64_t t0 = 0; t0 < s.n_tokens;) {
    const int64_t n = s.contiguous_blocks(t0);
    const Elem* rows = reinterpret_cast<const Elem*>(s.block(t0));  // [n, head_dim]
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const Elem* k0 = rows + j * d;
      const Elem *k1 = k0 + d, *k2 = k1 + d, *k3 = k2 + d;
      for (int r = 0; r < n_q; ++r) {
        const float* qr = q + r * d;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int i = 0; i < d; i += 16) {
          const __mmask16 m = d - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (d - i)) - 1);
          const __m512 qv = _mm512_maskz_loadu_ps(m, qr + i);
          a0 = _mm512_fmadd_ps(qv, load16(k0 + i, m), a0);
          a1 = _mm512_fmadd_ps(qv, load16(k1 + i, m), a1);
          a2 = _mm512_fmadd_ps(qv, load16(k2 + i, m), a2);
          a3 = _mm512_fmadd_ps(qv, load16(k3 + i, m), a3);
        }
        float* lr = logits + r * ld + t0 + j;
        lr[0] = hsum16(a0) * scale; lr[1] = hsum16(a1) * scale;
        lr[2] = hsum16(a2) * scale; lr[3] = hsum16(a3) * scale;
      }
    }
    for (; j < n; ++j) {
      const Elem* k0 = rows + j * d;
      for (int r = 0; r < n_q; ++r) {
        const float* qr = q + r * d;
        __m512 a0 = _mm512_setzero_ps();
        for (int i = 0; i < d; i += 16) {
          const __mmask16 m = d - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (d - i)) - 1);
          a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, qr + i), load16(k0 + i, m), a0);
        }
        logits[r * ld + t0 + j] = hsum16(a0) * scale;
      }
    }
    t0 += n;
  }
}

template <class Elem>
VLKV_AVX512 void accumulate_avx512(const float* p, int64_t ld, int n_q, const SegmentView& s, float* out) {
  const int d = s.head_dim;
  for (int64_t t0 = 0; t0 < s.n_tokens;) {
    const int64_t n = s.contiguous_blocks(t0);
    const Elem* rows = reinterpret_cast<const Elem*>(s.block(t0));  // [n, head_dim]
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const Elem* v0 = rows + j * d;
      const Elem *v1 = v0 + d, *v2 = v1 + d, *v3 = v2 + d;
      for (int r = 0; r < n_q; ++r) {
        const float* pr = p + r * ld + t0 + j;
        const __m512 w0 = _mm512_set1_ps(pr[0]), w1 = _mm512_set1_ps(pr[1]);
        const __m512 w2 = _mm512_set1_ps(pr[2]), w3 = _mm512_set1_ps(pr[3]);
        float* o = out + r * d;
        for (int i = 0; i < d; i += 16) {
          const __mmask16 m = d - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (d - i)) - 1);
          __m512 acc = _mm512_maskz_loadu_ps(m, o + i);
          acc = _mm512_fmadd_ps(w0, load16(v0 + i, m), acc);
          acc = _mm512_fmadd_ps(w1, load16(v1 + i, m), acc);
          acc = _mm512_fmadd_ps(w2, load16(v2 + i, m), acc);
          acc = _mm512_fmadd_ps(w3, load16(v3 + i, m), acc);
          _mm512_mask_storeu_ps(o + i, m, acc);
        }
      }
    }
    for (; j < n; ++j) {
      const Elem* v0 = rows + j * d;
      for (int r = 0; r < n_q; ++r) {
        const __m512 w0 = _mm512_set1_ps(p[r * ld + t0 + j]);
        float* o = out + r * d;
        for (int i = 0; i < d; i += 16) {
          const __mmask16 m = d - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (d - i)) - 1);
          _mm512_mask_storeu_ps(o + i, m, _mm512_fmadd_ps(w0, load16(v0 + i, m), _mm512_maskz_loadu_ps(m, o + i)));
        }
      }
    }
    t0 += n;
  }
}

// ---------------- dispatch ----------------
template <class Elem>
void scores(const float* q, int n_q, const SegmentView& s, float scale, float* logits, int64_t ld) {
  switch (simd_level()) {
    case SimdLevel::kAvx512: return scores_avx512<Elem>(q, n_q, s, scale, logits, ld);
    case SimdLevel::kAvx2: return scores_avx2<Elem>(q, n_q, s, scale, logits, ld);
    default: return scores_scalar<Elem>(q, n_q, s, scale, logits, ld);
  }
}

template <class Elem>
void accumulate(const float* p, int64_t ld, int n_q, const SegmentView& s, float* out) {
  switch (simd_level()) {
    case SimdLevel::kAvx512: return accumulate_avx512<Elem>(p, ld, n_q, s, out);
    case SimdLevel::kAvx2: return accumulate_avx2<Elem>(p, ld, n_q, s, out);
    default: return accumulate_scalar<Elem>(p, ld, n_q, s, out);
  }
}

#undef VLKV_AVX2
#undef VLKV_AVX512

}  // namespace vlkv::float_kernels
