// Blocked attention: every head's keys and values are packed once into the micro-kernel's
// panel layout (keys nr at a time, [n / nr][head_dim][nr]; values in nr-wide column groups,
// [head_dim / nr][n][nr]); then each task, one head's block of queries, walks the key blocks:
// S = Q K^T for the block (in L2), the running max and sum per query, P = exp(S - max), and
// O = O * exp(old max - new max) + P V. Memory: the packed K and V, and per thread one block
// of scores and outputs, instead of n x n scores per head.
#include "kernels/attention_f32.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "kernels/gemm_f32.h"

namespace vlkv {
namespace {

constexpr int64_t kKeyBlock = 256;    // keys per block: the score block [q_block, 256] stays in L2
constexpr int64_t kQueryTarget = 64;  // queries per task (rounded up to the kernel's mr)

// Every head's keys and values in the micro-kernel's panel layout (the file comment's).
struct KvPanels {
  int64_t nr, n_key_groups, n_keys_pad, n_dim_groups, dim_pad;
  std::vector<float> k;  // [n_heads][n_key_groups][head_dim][nr]
  std::vector<float> v;  // [n_heads][n_dim_groups][n][nr]
};

KvPanels pack_panels(const float* k, const float* v, int64_t n, int64_t n_heads, int64_t head_dim, int64_t nr,
                     ThreadPool& pool) {
  KvPanels p;
  p.nr = nr;
  p.n_key_groups = (n + nr - 1) / nr;
  p.n_keys_pad = p.n_key_groups * nr;
  p.n_dim_groups = (head_dim + nr - 1) / nr;
  p.dim_pad = p.n_dim_groups * nr;
  p.k.resize(static_cast<size_t>(n_heads * p.n_keys_pad * head_dim));
  p.v.resize(static_cast<size_t>(n_heads * p.n_dim_groups * n * nr));
  const int64_t dim = n_heads * head_dim;
  pool.parallel_for(n_heads, [&](int64_t h0, int64_t h1, int) {
    for (int64_t h = h0; h < h1; ++h) {
      float* kh = p.k.data() + h * p.n_keys_pad * head_dim;
      for (int64_t g = 0; g < p.n_key_groups; ++g) {
        float* dst = kh + g * head_dim * nr;
        for (int64_t j = 0; j < nr; ++j) {
          const int64_t t = g * nr + j;
          const float* src = k + t * dim + h * head_dim;
          for (int64_t c = 0; c < head_dim; ++c) dst[c * nr + j] = t < n ? src[c] : 0.0f;
        }
      }
      float* vh = p.v.data() + h * p.n_dim_groups * n * nr;
      for (int64_t g = 0; g < p.n_dim_groups; ++g) {
        const int64_t cols = std::min(nr, head_dim - g * nr);
        for (int64_t t = 0; t < n; ++t) {
          float* dst = vh + (g * n + t) * nr;
          const float* src = v + t * dim + h * head_dim + g * nr;
          std::copy_n(src, cols, dst);
          std::fill(dst + cols, dst + nr, 0.0f);
        }
      }
    }
  });
  return p;
}

// One task's running state: scores of a key block, unnormalized outputs, max and sum per query.
struct QueryBlockState {
  std::vector<float> s, o, row_max, row_sum;
};

// Online softmax over one key block's scores (nq rows of nk in st.s): the new running max,
// the rescale of what was summed so far, P in place of S.
void softmax_block(const GemmF32Kernels& kern, QueryBlockState& st, int64_t nq, int64_t nk, bool first,
                   float scale, int64_t dim_pad) {
  for (int64_t i = 0; i < nq; ++i) {
    float* si = st.s.data() + i * kKeyBlock;
    const float m_new_raw = kern.row_max(si, nk) * scale;  // scale > 0: max of the scaled logits
    if (first) {
      st.row_max[i] = m_new_raw;
      st.row_sum[i] = kern.exp_sum(si, nk, scale, m_new_raw);
      continue;
    }
    const float m_new = std::max(st.row_max[i], m_new_raw);
    float corr = m_new - st.row_max[i];
    if (corr != 0.0f) {
      kern.exp_sum(&corr, 1, -1.0f, 0.0f);  // exp(old - new), through the same formula
      float* oi = st.o.data() + i * dim_pad;
      for (int64_t c = 0; c < dim_pad; ++c) oi[c] *= corr;
      st.row_sum[i] *= corr;
    }
    st.row_max[i] = m_new;
    st.row_sum[i] += kern.exp_sum(si, nk, scale, m_new);
  }
}

}  // namespace

void attention_f32(const float* q, const float* k, const float* v, int64_t n, int64_t n_heads, int64_t head_dim,
                   float scale, float* out, ThreadPool& pool) {
  if (n <= 0) return;
  const GemmF32Kernels& kern = gemm_f32_kernels();
  const int64_t mr = kern.mr, nr = kern.nr;
  const int64_t dim = n_heads * head_dim;
  const KvPanels p = pack_panels(k, v, n, n_heads, head_dim, nr, pool);
  const int64_t q_block = (std::min(kQueryTarget, n) + mr - 1) / mr * mr;
  const int64_t n_q_blocks = (n + q_block - 1) / q_block;
  pool.parallel_for_chunked(n_heads * n_q_blocks, 1, [&](int64_t task0, int64_t task1, int) {
    thread_local QueryBlockState st;
    st.s.resize(static_cast<size_t>(q_block * kKeyBlock));  // [q_block, kKeyBlock] scores, then P
    st.o.resize(static_cast<size_t>(q_block * p.dim_pad));  // [q_block, dim_pad] unnormalized outputs
    st.row_max.resize(static_cast<size_t>(q_block));
    st.row_sum.resize(static_cast<size_t>(q_block));
    for (int64_t task = task0; task < task1; ++task) {
      const int64_t h = task / n_q_blocks;
      const int64_t t0 = (task % n_q_blocks) * q_block;
      const int64_t nq = std::min(q_block, n - t0);
      const float* kh = p.k.data() + h * p.n_keys_pad * head_dim;
      const float* vh = p.v.data() + h * p.n_dim_groups * n * nr;
      std::fill_n(st.o.begin(), nq * p.dim_pad, 0.0f);
      for (int64_t kb = 0; kb < n; kb += kKeyBlock) {
        const int64_t nk = std::min(kKeyBlock, n - kb);
        const int64_t kgroups = (nk + nr - 1) / nr;
        // S [nq, kgroups * nr] = Q K^T over this block's keys (columns past nk are padding).
        for (int64_t i = 0; i < nq; i += mr) {
          const int m = static_cast<int>(std::min(mr, nq - i));
          const float* a = q + (t0 + i) * dim + h * head_dim;
          for (int64_t g = 0; g < kgroups; ++g)
            kern.fns[m - 1](a, dim, kh + (kb / nr + g) * head_dim * nr, head_dim, st.s.data() + i * kKeyBlock + g * nr,
                            kKeyBlock, false);
        }
        softmax_block(kern, st, nq, nk, kb == 0, scale, p.dim_pad);
        // O += P V over the block's nk keys.
        for (int64_t i = 0; i < nq; i += mr) {
          const int m = static_cast<int>(std::min(mr, nq - i));
          for (int64_t g = 0; g < p.n_dim_groups; ++g)
            kern.fns[m - 1](st.s.data() + i * kKeyBlock, kKeyBlock, vh + (g * n + kb) * nr, nk,
                            st.o.data() + i * p.dim_pad + g * nr, p.dim_pad, true);
        }
      }
      for (int64_t i = 0; i < nq; ++i) {
        const float inv = 1.0f / st.row_sum[i];
        const float* oi = st.o.data() + i * p.dim_pad;
        float* dst = out + (t0 + i) * dim + h * head_dim;
        for (int64_t c = 0; c < head_dim; ++c) dst[c] = oi[c] * inv;
      }
    }
  });
}

}  // namespace vlkv
