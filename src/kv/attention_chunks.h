// Internal to the attention code (attention.cpp, attention_stats.cpp): runs of cached
// tokens as kernel views ("chunks"), the vectorized softmax helpers and the query-tile
// shape they share. Not for methods or the decoder.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "kv/codec.h"
#include "kv/segment.h"

namespace vlkv::attn {

constexpr int64_t kChunkTokens = 256;  // keys per scores/accumulate call: logits fit in L1/L2
constexpr int kTileRows = 64;          // query rows (token, head of the GQA group) per task
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A run of cached tokens of one segment: K and V views over the same tokens.
struct Chunk {
  const Codec* kc;
  const Codec* vc;
  SegmentView k, v;
  int64_t first = 0;  // storage index (within the kv head, segment after segment) of the first token
  bool alt_keys = false;  // keys of key_source's segment (this segment has no K of its own)
};

// Appends kv head g's cached chunks in storage order. key_source: see attend_layer.
void build_chunks(const LayerCache& layer, const LayerCache* key_source, int g, int d, std::vector<Chunk>& out);

// A chunk over n contiguous f32 rows starting at row `first` of the one-page buffers
// kpage[0], vpage[0] (rows_in_page rows each): the step's new tokens.
Chunk f32_rows_chunk(const Codec& f32, const uint8_t* const* kpage, const uint8_t* const* vpage, int64_t first,
                     int64_t n, int64_t rows_in_page, int d);

// Tokens [t0, t0 + n) of a chunk, t0 and n multiples of both codecs' tokens_per_block.
Chunk sub_chunk(const Chunk& c, int64_t t0, int64_t n);

// Sparse attention skips a chunk's keys in granules: runs of at least kSparseGranule
// tokens (whole blocks of both codecs) with no kept key are not read, the others are
// scored with the unkept keys masked. Smaller granules would mean more, shorter kernel
// calls; the 16-token tiles of the integer codecs set the scale.
constexpr int64_t kSparseGranule = 16;
int64_t sparse_granule(const Chunk& c);  // a multiple of both codecs' tokens_per_block, >= kSparseGranule

// Calls f(t0, n) for each maximal run [t0, t0 + n) of granules of chunk c holding a kept key.
//   keep: [c.k.n_tokens] the chunk's keys, 1 = kept
template <class F>
void for_each_kept_run(const Chunk& c, const uint8_t* keep, F&& f) {
  const int64_t n = c.k.n_tokens, gr = sparse_granule(c);
  int64_t run = -1;  // first token of the open run, -1: none open
  for (int64_t t0 = 0; t0 < n; t0 += gr) {
    const int64_t t1 = std::min(n, t0 + gr);
    bool any = false;
    for (int64_t t = t0; t < t1 && !any; ++t) any = keep[t] != 0;
    if (any && run < 0) run = t0;
    if (!any && run >= 0) {
      f(run, t0 - run);
      run = -1;
    }
  }
  if (run >= 0) f(run, n - run);
}

// In place: x[t] <- exp(x[t] - m) for t < n; returns the sum. m is finite and >= every x[t].
float exp_sub_sum(float* x, int64_t n, float m);
float max_of(const float* x, int64_t n);

}  // namespace vlkv::attn
