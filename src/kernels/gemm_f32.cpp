// The exact f32 prefill GEMM's driver (panel packing, blocking, threads) and its scalar
// micro-kernels; the SIMD ones are in gemm_f32_x86.cpp and gemm_f32_arm.cpp.
#include "kernels/gemm_f32.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "base/simd_dispatch.h"
#include "kernels/exp_poly.h"
#include "quant/weight_format.h"

namespace vlkv {
namespace {

// Scalar reference micro-kernel: M token rows x kScalarNr weight rows, one product at a time
// in column order (the compiler vectorizes the j loop; it may not reassociate the k chain).
constexpr int kScalarMr = 4, kScalarNr = 16;

template <int M>
void gemm_scalar(const float* a, int64_t lda, const float* b, int64_t kc, float* c, int64_t ldc, bool accumulate) {
  float acc[M][kScalarNr];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < kScalarNr; ++j) acc[i][j] = accumulate ? c[i * ldc + j] : 0.0f;
  for (int64_t k = 0; k < kc; ++k) {
    const float* bk = b + k * kScalarNr;
    for (int i = 0; i < M; ++i) {
      const float av = a[i * lda + k];
      for (int j = 0; j < kScalarNr; ++j) acc[i][j] += av * bk[j];
    }
  }
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < kScalarNr; ++j) c[i * ldc + j] = acc[i][j];
}

template <int M> struct ScalarK { static constexpr GemmF32Fn fn = &gemm_scalar<M>; };

float row_max_scalar(const float* s, int64_t n) {
  float m = s[0];
  for (int64_t i = 1; i < n; ++i) m = s[i] > m ? s[i] : m;
  return m;
}

float exp_sum_scalar(float* s, int64_t n, float scale, float shift) {
  using namespace exp_poly;
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = std::clamp(s[i] * scale - shift, kMin, kMax);
    const float fx = std::floor(x * kLog2e + 0.5f);
    const float r = (x - fx * kLn2Hi) - fx * kLn2Lo;
    const float p = ((((kP0 * r + kP1) * r + kP2) * r + kP3) * r + kP4) * r + kP5;
    const float e = p * (r * r) + r + 1.0f;
    const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(fx) + 127) << 23;
    float pow2;
    std::memcpy(&pow2, &bits, sizeof pow2);
    s[i] = e * pow2;
    sum += s[i];
  }
  return sum;
}

constexpr int64_t kKc = 256;        // columns per panel: a multiple of every block size (32, 256)
constexpr int kPanelGroups = 4;     // nr-row groups per panel (128 rows x 256 columns = 128 KiB at AVX-512: L2)

const WeightFormat& format_of(const WeightMatrix& w) {
  const WeightFormat* fmt = find_weight_format(w.type);
  VLKV_CHECK_MSG(fmt != nullptr, ggml_type_name(w.type));
  VLKV_CHECK(w.n_cols % fmt->block_elems == 0 && kKc % fmt->block_elems == 0);
  return *fmt;
}

// Dequantizes rows [r0, r0 + n_rows) x columns [k0, k0 + kc) of w into panel
// [ceil(n_rows / nr)][kc][nr]; rows past n_rows of the last group are zero. rows_buf: nr * kc
// floats, a group's rows dequantized side by side before the tier's pack interleaves them.
void pack_panel(const GemmF32Kernels& kern, const WeightMatrix& w, const WeightFormat& fmt, int64_t r0,
                int64_t n_rows, int64_t k0, int64_t kc, float* panel, float* rows_buf) {
  const int nr = kern.nr;
  const size_t byte_offset = static_cast<size_t>(k0 / fmt.block_elems) * fmt.block_bytes;
  const int64_t n_groups = (n_rows + nr - 1) / nr;
  for (int64_t g = 0; g < n_groups; ++g) {
    const int rows = static_cast<int>(std::min<int64_t>(nr, n_rows - g * nr));
    for (int j = 0; j < rows; ++j)
      fmt.dequantize_row(w.data + (r0 + g * nr + j) * w.row_bytes + byte_offset, rows_buf + j * kc, kc);
    kern.pack(rows_buf, kc, rows, kc, nr, panel + g * kc * nr);
  }
}

}  // namespace

void gemm_f32_pack_scalar(const float* rows, int64_t ld, int n_rows, int64_t kc, int nr, float* panel) {
  for (int j = 0; j < nr; ++j) {
    if (j >= n_rows) {
      for (int64_t k = 0; k < kc; ++k) panel[k * nr + j] = 0.0f;
      continue;
    }
    for (int64_t k = 0; k < kc; ++k) panel[k * nr + j] = rows[j * ld + k];
  }
}

const GemmF32Kernels& gemm_f32_kernels() {
  static const GemmF32Kernels scalar = make_gemm_f32_table<kScalarMr, kScalarNr, ScalarK>(&row_max_scalar, &exp_sum_scalar);
  static const SimdTable<GemmF32Kernels> table(VLKV_SIMD_VARIANTS(&scalar, kGemmF32, avx2, avx512, neon));
  return table.get();
}

void gemm_f32(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  const MatvecTarget target{&w, y};
  gemm_f32_fused(std::span<const MatvecTarget>(&target, 1), x, n_tokens, pool);
}

void gemm_f32_fused(std::span<const MatvecTarget> targets, const float* x, int64_t n_tokens, ThreadPool& pool) {
  constexpr size_t kMaxTargets = 4;
  VLKV_CHECK(targets.size() <= kMaxTargets);
  if (n_tokens <= 0 || targets.empty()) return;
  const GemmF32Kernels& kern = gemm_f32_kernels();
  const int mr = kern.mr, nr = kern.nr;
  const int64_t K = targets[0].w->n_cols;
  const int64_t panel_rows = static_cast<int64_t>(kPanelGroups) * nr;
  std::array<const WeightFormat*, kMaxTargets> fmts{};
  std::array<int64_t, kMaxTargets + 1> first_panel{};  // target i's panels are [first_panel[i], first_panel[i + 1])
  for (size_t i = 0; i < targets.size(); ++i) {
    VLKV_CHECK(targets[i].w->n_cols == K);
    fmts[i] = &format_of(*targets[i].w);
    first_panel[i + 1] = first_panel[i] + (targets[i].w->n_rows + panel_rows - 1) / panel_rows;
  }
  const int64_t n_panels = first_panel[targets.size()];
  if (n_panels == 0) return;
  // Token blocks per panel: one (each panel dequantized once) unless there are too few panels
  // to give every thread ~4 tasks; a block repacks its panel, which costs 1/block_tokens of its
  // multiply-adds. The targets' panels share one task list, so one wake-up and one tail for all.
  const int64_t want_tasks = 4 * static_cast<int64_t>(pool.n_threads());
  const int64_t max_blocks = (n_tokens + mr - 1) / mr;
  const int64_t n_tblocks = std::clamp<int64_t>((want_tasks + n_panels - 1) / n_panels, 1, max_blocks);
  int64_t block_tokens = (n_tokens + n_tblocks - 1) / n_tblocks;
  block_tokens = (block_tokens + mr - 1) / mr * mr;
  const int64_t n_blocks = (n_tokens + block_tokens - 1) / block_tokens;

  pool.parallel_for_chunked(n_panels * n_blocks, 1, [&](int64_t task0, int64_t task1, int) {
    thread_local std::vector<float> panel, row_buf, ctile;
    panel.resize(static_cast<size_t>(panel_rows * kKc));
    row_buf.resize(static_cast<size_t>(nr * kKc));
    ctile.resize(static_cast<size_t>(16 * nr));  // [mr, nr] a tile whose weight rows end past N
    for (int64_t task = task0; task < task1; ++task) {
      const int64_t gp = task / n_blocks, blk = task % n_blocks;
      size_t ti = 0;
      while (gp >= first_panel[ti + 1]) ++ti;
      const WeightMatrix& w = *targets[ti].w;
      const WeightFormat& fmt = *fmts[ti];
      float* y = targets[ti].y;
      const int64_t N = w.n_rows;
      const int64_t r0 = (gp - first_panel[ti]) * panel_rows, n_rows = std::min(panel_rows, N - r0);
      const int64_t t_begin = blk * block_tokens, t_end = std::min(n_tokens, t_begin + block_tokens);
      const int64_t n_groups = (n_rows + nr - 1) / nr;
      for (int64_t k0 = 0; k0 < K; k0 += kKc) {
        const int64_t kc = std::min(kKc, K - k0);
        const bool accumulate = k0 > 0;
        pack_panel(kern, w, fmt, r0, n_rows, k0, kc, panel.data(), row_buf.data());
        for (int64_t t = t_begin; t < t_end; t += mr) {
          const int m = static_cast<int>(std::min<int64_t>(mr, t_end - t));
          const GemmF32Fn fn = kern.fns[m - 1];
          const float* a = x + t * K + k0;
          for (int64_t g = 0; g < n_groups; ++g) {
            const float* b = panel.data() + g * kc * nr;
            float* c = y + t * N + r0 + g * nr;
            const int cols = static_cast<int>(std::min<int64_t>(nr, n_rows - g * nr));
            if (cols == nr) {
              fn(a, K, b, kc, c, N, accumulate);
              continue;
            }
            // The last group of the matrix: through a full-width tile, valid columns copied.
            for (int i = 0; i < m; ++i) {
              std::fill_n(&ctile[i * nr], nr, 0.0f);
              if (accumulate) std::memcpy(&ctile[i * nr], c + i * N, sizeof(float) * cols);
            }
            fn(a, K, b, kc, ctile.data(), nr, accumulate);
            for (int i = 0; i < m; ++i) std::memcpy(c + i * N, &ctile[i * nr], sizeof(float) * cols);
          }
        }
      }
    }
  });
}

}  // namespace vlkv
