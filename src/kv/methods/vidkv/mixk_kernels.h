// Kernels of the mixk codec's fused scores (mixed_codec.cpp): per block and query row, the
// plane weights and base score, and the split of a query by the block's channel map.
// Scalar reference here, AVX2, AVX-512 and NEON kernels in mixk_kernels_{avx2,avx512,arm}.cpp,
// dispatched through sign1_kernels.h.
#pragma once

#include <cstdint>


namespace vlkv::mixk {

// One query row's plane weights and base score over a block:
//   q.x^ = base + sum_j w_j bit_j,  base = sum_O q m + sum_N' qc sigma,
//   w = {q s (low planes), 2 q s (high planes), -2 qc sigma (sign planes)}
//   qo: [n_out], qc: [nc], os: [n_out, 2] {scale, min}, sig: [nc], w: [2 n_out + nc]
inline void row_weights_scalar(const float* qo, const float* qc, const float* os, const float* sig, int n_out, int nc,
                             float* w, float* base) {
  float bo = 0.0f, bn = 0.0f;
  for (int j = 0; j < n_out; ++j) {
    bo += qo[j] * os[2 * j + 1];
    w[j] = qo[j] * os[2 * j];
    w[n_out + j] = 2.0f * w[j];
  }
  for (int k = 0; k < nc; ++k) {
    const float qs = qc[k] * sig[k];
    bn += qs;
    w[2 * n_out + k] = -2.0f * qs;
  }
  *base = bo + bn;
}

// qo = q at the block's outlier channels (mask bit 1), qn = q at the others, both in
// ascending channel order.  q: [d], mask: [ceil(d/8)], qo, qn: [d + 16] (SIMD kernels
// store whole vectors past the counts).
inline void split_query_scalar(const float* q, const uint8_t* mask, int d, float* qo, float* qn) {
  int no = 0, nn = 0;
  for (int c = 0; c < d; ++c) {  // branch-free: the map is data
    const int bit = (mask[c / 8] >> (c % 8)) & 1;
    qo[no] = q[c];
    qn[nn] = q[c];
    no += bit;
    nn += 1 - bit;
  }
}

void row_weights_avx2(const float* qo, const float* qc, const float* os, const float* sig, int n_out, int nc, float* w,
                      float* base);
void row_weights_avx512(const float* qo, const float* qc, const float* os, const float* sig, int n_out, int nc,
                        float* w, float* base);
void split_query_avx2(const float* q, const uint8_t* mask, int d, float* qo, float* qn);
void split_query_avx512(const float* q, const uint8_t* mask, int d, float* qo, float* qn);
void row_weights_neon(const float* qo, const float* qc, const float* os, const float* sig, int n_out, int nc, float* w,
                      float* base);  // mixk_kernels_arm.cpp
void split_query_neon(const float* q, const uint8_t* mask, int d, float* qo, float* qn);

}  // namespace vlkv::mixk
