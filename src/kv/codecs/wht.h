// Fast normalized Walsh-Hadamard transform over a head vector: x <- x H / sqrt(d),
// H the Sylvester Hadamard matrix (symmetric, H H = d I). The normalized transform is
// orthonormal and its own inverse, so (qH)(kH)^T = q k^T and applying it twice gives x.
#pragma once

#include <cmath>
#include <cstdint>

namespace vlkv {

inline bool is_power_of_two(int d) { return d > 0 && (d & (d - 1)) == 0; }

// The scalar reference. x: [d], in place; d a power of two. O(d log d) adds, one scale.
inline void wht(float* x, int d) {
  for (int h = 1; h < d; h *= 2)
    for (int i = 0; i < d; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
  const float s = 1.0f / std::sqrt(static_cast<float>(d));
  for (int i = 0; i < d; ++i) x[i] *= s;
}

// x: [n, d] rows, each transformed in place; dispatched on the SIMD tier (wht.cpp; the
// AVX2 and NEON variants, wht_avx2.cpp / wht_arm.cpp, do the same butterflies in the same order:
// bit-identical).
void wht_rows(float* x, int64_t n, int d);

}  // namespace vlkv
