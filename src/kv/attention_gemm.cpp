#include "kv/attention_gemm.h"

#include <algorithm>
#include <cstring>

#include "kernels/gemm_f32.h"
#include "quant/weight_format.h"

namespace vlkv::attn {
namespace {

bool plain_rows(const Codec& c) { return c.name() == "f16" || c.name() == "f32"; }

// x [view tokens, head_dim] = the view's rows in f32, a page run at a time: f16 widened by the
// F16 weight format's vectorized row kernel (bit-identical to the codec's decode), f32 copied.
void decode_rows(const Codec& c, const SegmentView& v, float* x) {
  static const WeightFormat* half = find_weight_format(GgmlType::kF16);
  const int d = v.head_dim;
  const bool f16 = c.name() == "f16";
  for (int64_t b = 0; b < v.n_blocks();) {
    const int64_t n = v.contiguous_blocks(b);
    if (f16) half->dequantize_row(v.block(b), x + b * d, n * d);
    else std::memcpy(x + b * d, v.block(b), sizeof(float) * n * d);
    b += n;
  }
}

}  // namespace

bool gemm_path_fits(int d) { return d > 0 && d % gemm_f32_kernels().nr == 0; }

bool gemm_reads(const Chunk& c) { return plain_rows(*c.kc) && plain_rows(*c.vc); }

int64_t gemm_logits_ld(int64_t n) {
  const int64_t nr = gemm_f32_kernels().nr;
  return (n + nr - 1) / nr * nr;
}

int64_t gemm_pack(const Chunk& c, const uint8_t* keep, int d, GemmScratch& s, bool values) {
  const int64_t n_all = c.k.n_tokens, nr = gemm_f32_kernels().nr;
  s.krows.resize(static_cast<size_t>(n_all * d));
  s.vrows.resize(s.krows.size());
  int64_t n = n_all;
  if (!keep) {
    decode_rows(*c.kc, c.k, s.krows.data());
    if (values) decode_rows(*c.vc, c.v, s.vrows.data());
  } else {  // decode the runs holding kept tokens, then move the kept rows to the front
    n = 0;
    for_each_kept_run(c, keep, [&](int64_t t0, int64_t len) {
      const Chunk run = sub_chunk(c, t0, len);
      float* kr = s.krows.data() + t0 * d;
      float* vr = s.vrows.data() + t0 * d;
      decode_rows(*c.kc, run.k, kr);
      if (values) decode_rows(*c.vc, run.v, vr);
      for (int64_t t = 0; t < len; ++t) {
        if (!keep[t0 + t]) continue;
        if (n != t0 + t) {  // n <= t0 + t: never overwrites a row not yet read
          std::memcpy(s.krows.data() + n * d, kr + t * d, sizeof(float) * d);
          if (values) std::memcpy(s.vrows.data() + n * d, vr + t * d, sizeof(float) * d);
        }
        ++n;
      }
    });
  }
  const int64_t n_groups = (n + nr - 1) / nr;
  s.kp.resize(static_cast<size_t>(n_groups * nr * d));
  for (int64_t g = 0; g < n_groups; ++g) {  // keys nr at a time, channel-major (padding keys are 0)
    float* dst = s.kp.data() + g * d * nr;
    for (int64_t j = 0; j < nr; ++j) {
      const int64_t t = g * nr + j;
      const float* src = s.krows.data() + t * d;
      if (t < n)
        for (int i = 0; i < d; ++i) dst[i * nr + j] = src[i];
      else
        for (int i = 0; i < d; ++i) dst[i * nr + j] = 0.0f;
    }
  }
  if (!values) return n;
  s.vp.resize(static_cast<size_t>(n * d));
  for (int64_t g = 0; g < d / nr; ++g)  // values in nr-channel column groups
    for (int64_t t = 0; t < n; ++t)
      std::memcpy(s.vp.data() + (g * n + t) * nr, s.vrows.data() + t * d + g * nr, sizeof(float) * nr);
  return n;
}

void gemm_scores(const GemmScratch& s, int64_t n, const float* q, int rows, int d, float scale, float* logits,
                 int64_t ld) {
  const GemmF32Kernels& kern = gemm_f32_kernels();
  const int64_t nr = kern.nr, n_groups = (n + nr - 1) / nr;
  for (int r0 = 0; r0 < rows; r0 += kern.mr) {
    const int m = std::min(kern.mr, rows - r0);
    for (int64_t g = 0; g < n_groups; ++g)
      kern.fns[m - 1](q + static_cast<int64_t>(r0) * d, d, s.kp.data() + g * d * nr, d, logits + r0 * ld + g * nr, ld,
                      false);
  }
  for (int r = 0; r < rows; ++r) {  // scaled after the dot, as the fused kernels round scale * dot
    float* lr = logits + r * ld;
    for (int64_t t = 0; t < n; ++t) lr[t] *= scale;
  }
}

void gemm_accumulate(const GemmScratch& s, int64_t n, const float* p, int64_t ld, int rows, int d, float* acc) {
  const GemmF32Kernels& kern = gemm_f32_kernels();
  const int64_t nr = kern.nr;
  for (int r0 = 0; r0 < rows; r0 += kern.mr) {
    const int m = std::min(kern.mr, rows - r0);
    for (int64_t g = 0; g < d / nr; ++g)
      kern.fns[m - 1](p + r0 * ld, ld, s.vp.data() + g * n * nr, n, acc + static_cast<int64_t>(r0) * d + g * nr, d,
                      true);
  }
}

void gemm_chunk_scores(const Chunk& c, const float* q, int rows, int d, float scale, float* out, int64_t ld,
                       GemmScratch& s) {
  const int64_t n = gemm_pack(c, nullptr, d, s, /*values=*/false), ldp = gemm_logits_ld(n);
  s.logits.resize(static_cast<size_t>(rows * ldp));
  gemm_scores(s, n, q, rows, d, scale, s.logits.data(), ldp);
  for (int r = 0; r < rows; ++r) std::memcpy(out + r * ld, s.logits.data() + r * ldp, sizeof(float) * n);
}

}  // namespace vlkv::attn
