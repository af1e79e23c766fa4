// exp(x) in f32 by range reduction and a polynomial (Cephes expf's coefficients): the one
// formula of the scalar and SIMD softmax kernels (gemm_f32*.cpp), so every tier rounds the
// same way up to fused multiply-adds. x = n ln2 + r, |r| <= ln2 / 2; exp(r) = 1 + r + r^2 P(r);
// times 2^n through the exponent bits. Relative error < 2e-7 for x in [-87.3, 88.3]; x is
// clamped there (exp(-87.3) ~ 1e-38 stands for 0: the caller's sums do not see it).
#pragma once

namespace vlkv::exp_poly {

inline constexpr float kMin = -87.3f, kMax = 88.3f;  // 2^n stays a normal float: n in [-126, 127]
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;  // ln 2 = hi + lo
inline constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                       kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

}  // namespace vlkv::exp_poly
