// A codec is one way to store one stream (the K or the V rows) of a segment in pages,
// plus the two fused decode-attention operations that read that storage in place.
// Codecs are immutable after creation and safe to use from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "vlkv/status.h"

namespace vlkv {

// A plain, non-owning view of a run of tokens of one stream, for kernels (as in
// flashinfer / vLLM: page pointers + counts, no ownership, no virtuals).
// Storage unit is the *block*: tokens_per_block tokens (1 for per-token codecs;
// G for codecs that group tokens, e.g. per-channel quantization over G tokens)
// in block_bytes bytes. Blocks never straddle pages: a page holds blocks_per_page
// blocks back to back from its start; the tail of a page may be unused.
struct SegmentView {
  const uint8_t* const* pages = nullptr;  // [ceil((first_block + n_blocks) / blocks_per_page)] page bases
  int64_t first_block = 0;  // index, counting across pages, of the view's first block
  int64_t n_tokens = 0;     // a multiple of tokens_per_block
  int32_t blocks_per_page = 0;
  int32_t block_bytes = 0;
  int32_t tokens_per_block = 1;
  int32_t head_dim = 0;

  int64_t n_blocks() const { return n_tokens / tokens_per_block; }
  // Block b of the view (0-based from first_block).
  const uint8_t* block(int64_t b) const {
    const int64_t g = first_block + b;
    return pages[g / blocks_per_page] + (g % blocks_per_page) * static_cast<int64_t>(block_bytes);
  }
  // Blocks b.. that are contiguous in memory (same page): at least 1.
  int64_t contiguous_blocks(int64_t b) const {
    const int64_t g = first_block + b;
    const int64_t left_in_page = blocks_per_page - g % blocks_per_page;
    return left_in_page < n_blocks() - b ? left_in_page : n_blocks() - b;
  }
};

class Codec {
 public:
  virtual ~Codec() = default;

  // Canonical spec, e.g. "f16" or "int4:g=32,clip=1".
  virtual const std::string& name() const = 0;
  // InvalidArgument when the codec cannot store heads of this size (e.g. WHT needs 2^k).
  virtual Status check_head_dim(int head_dim) const = 0;

  // ---- storage granularity ----
  virtual int tokens_per_block() const = 0;
  // Bytes of one block of tokens_per_block tokens of head_dim channels, metadata
  // (scales, zero points, channel maps) included.
  virtual int64_t block_bytes(int head_dim) const = 0;
  // Stored bytes per token of one stream (K or V of one kv head), metadata included.
  double bytes_per_token(int head_dim) const {
    return static_cast<double>(block_bytes(head_dim)) / tokens_per_block();
  }
  // Exact stored bits per element including metadata.
  double bits_per_element(int head_dim) const {
    return 8.0 * static_cast<double>(block_bytes(head_dim)) / (tokens_per_block() * static_cast<double>(head_dim));
  }
  // Round-trip bound: |decode(encode(x)) - x| <= error_bound() * max|x over the block|
  // (+ 2^-24 absolute for values in the f16 subnormal range). 0 for lossless codecs.
  virtual double error_bound() const = 0;
  // Relative RMS round-trip error on blocks of i.i.d. Gaussian data:
  // sqrt(sum (decode(encode(x)) - x)^2 / sum x^2) <= rms_error_bound(). Declared by the
  // 1-bit and ternary codecs, whose max-abs error_bound() is true but uninformative.
  // Negative: not declared.
  virtual double rms_error_bound() const { return -1.0; }

  // ---- scalar reference ----
  //   x:     [tokens_per_block rows, head_dim], row r at x + r * x_stride (floats)
  //   block: [block_bytes(head_dim)]
  virtual void encode(const float* x, int64_t x_stride, int head_dim, uint8_t* block) const = 0;
  //   x: [tokens_per_block, head_dim] contiguous
  virtual void decode(const uint8_t* block, int head_dim, float* x) const = 0;

  // ---- fused decode-attention ops (each codec's kernel tables pick the tier per call) ----
  // logits[r * ld + t] = scale * dot(q[r], k_t) for the view's tokens t, reading codes in place.
  //   q:      [n_q, head_dim]
  //   logits: [n_q, ld], ld >= seg.n_tokens
  virtual void scores(const float* q, int n_q, const SegmentView& seg, float scale, float* logits,
                      int64_t ld) const = 0;
  // out[r] += sum_t p[r * ld + t] * v_t.
  //   p:   [n_q, ld], non-negative (softmax weights)
  //   out: [n_q, head_dim]
  virtual void accumulate(const float* p, int64_t ld, int n_q, const SegmentView& seg, float* out) const = 0;

  // Bits the fused ops round their float inputs to at this head_dim and the current SIMD
  // level, or 0 where they compute on the stored values in f32 (each codec documents its
  // steps and error bound): queries in scores(), probabilities in accumulate().
  struct FusedRounding {
    int query_bits = 0;
    int prob_bits = 0;
  };
  virtual FusedRounding fused_rounding(int /*head_dim*/) const { return {}; }

  // ---- optional linear transforms (e.g. Walsh-Hadamard-rotated codecs) ----
  // Rows stored in a rotated basis keep decode() in the original basis, but the fused
  // ops work in the rotated one:
  //  - keys: scores() expects queries already passed through transform_query().
  //    Attention transforms each query tile once per step for every distinct id,
  //    not once per chunk; codecs returning the same nonzero id share one transformed
  //    copy (the transform must then be the same map). 0: no transform (the default).
  //  - values: accumulate() adds sum_t p_t * (v_t M) in the rotated basis. Attention
  //    keeps a separate accumulator for each nonzero id and applies
  //    untransform_output() (out <- out M^-1) to it once, at the end of the step.
  virtual int query_transform() const { return 0; }
  //   q: [n_q, head_dim], in place
  virtual void transform_query(float* /*q*/, int /*n_q*/, int /*head_dim*/) const {}
  virtual int output_transform() const { return 0; }
  //   out: [n_rows, head_dim], in place
  virtual void untransform_output(float* /*out*/, int /*n_rows*/, int /*head_dim*/) const {}
  // Round-trip bound for this head_dim when it is tighter than error_bound() (which
  // holds for every head_dim the codec accepts); same meaning.
  virtual double error_bound_at(int /*head_dim*/) const { return error_bound(); }
};

}  // namespace vlkv
