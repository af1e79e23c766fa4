// The AVX-512 VNNI unit of k_packed_x86.h's kernels: a 64-byte unit (8 bytes of each of 8 rows)
// in one 512-bit vector, one vpdpbusd per unit; its 256-bit halves are U256's, so rows() is the same
// (rows2 reduces two accumulators at once, in the same row order).
// Included only inside the VLKV_TARGET_BEGIN(VLKV_ISA_AVX512_VNNI) region of k_quant_avx512vnni.cpp.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/k_packed_x86.h"

namespace vlkv::quant::kstrided {
namespace {

struct U512 {
  static constexpr bool kWideCodes = true;  // vpdpbusd: unsigned bytes up to 255
  __m512i v;
  static U512 load(const uint8_t* p) { return {_mm512_loadu_si512(p)}; }
  static U512 zero() { return {_mm512_setzero_si512()}; }
  U512 operator&(__m256i m) const { return {_mm512_and_si512(v, _mm512_broadcast_i64x4(m))}; }
  U512 operator|(const U512& o) const { return {_mm512_or_si512(v, o.v)}; }
  template <int s>
  U512 shift16() const {
    if constexpr (s >= 0) return {_mm512_slli_epi16(v, s)};
    else return {_mm512_srli_epi16(v, -s)};
  }
  void madd(const U512& c, const int8_t* x) {
    int64_t xv;
    std::memcpy(&xv, x, 8);
    v = _mm512_dpbusd_epi32(v, c.v, _mm512_set1_epi64(xv));
  }
  __m256i rows() const { return _mm256_hadd_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)); }
  // lo.rows() and hi.rows() from two permutes and one add (row r's lanes: 64-bit slot kUnitRows^-1[r]).
  static void rows2(const U512& lo, const U512& hi, __m256i& rlo, __m256i& rhi) {
    const __m512i even = _mm512_setr_epi32(0, 2, 8, 10, 4, 6, 12, 14, 16, 18, 24, 26, 20, 22, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i r = _mm512_add_epi32(_mm512_permutex2var_epi32(lo.v, even, hi.v), _mm512_permutex2var_epi32(lo.v, odd, hi.v));
    rlo = _mm512_castsi512_si256(r);
    rhi = _mm512_extracti64x4_epi64(r, 1);
  }
};

}  // namespace
}  // namespace vlkv::quant::kstrided
