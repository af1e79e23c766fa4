// ternary: 1.58-bit per-channel values/keys over G tokens (VidKV's values; see
// sign1_codecs.h). Block of G tokens, head_dim d:
//   [d] f16                   scale_c = mean_t |x_tc|
//   [ceil(G*d/5)] bytes       trits, trit i at byte i/5, base-3 digit i%5 (least
//                             significant first), digit = code + 1; trit i holds element
//                             (t, c) in the order of ternary_tiles.h (row-major t*d + c,
//                             or VNNI tiles when head_dim % 16 == 0 and G % 4 == 0)
// code = +1 if x > thr*scale, -1 if x < -thr*scale, else 0; decode: code * scale.
// On tiles (AVX2 and up) the fused ops decode a block's trits once into int8 codes in tile
// order (AVX-512 VBMI digit tables, else AVX2 byte compares) and accumulate by integer
// dots of 15-bit probabilities against them (vpdpbusd at AVX-512 VNNI or AVX-VNNI, else
// maddubs); scores run f32 dots on the same codes (ternary_tiles.h). Row-ordered blocks
// decode through a 256-entry table (byte -> 5 int8 codes) and run float SIMD; the scalar
// reference reads digits directly.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kv/codec_registry.h"
#include "kv/methods/vidkv/choice_param.h"
#include "kv/methods/vidkv/sign1_codecs.h"
#include "kv/methods/vidkv/sign1_kernels.h"
#include "kv/methods/vidkv/sign1_planes.h"
#include "kv/methods/vidkv/ternary_tiles.h"

namespace vlkv {
namespace {

constexpr int kPow3[5] = {1, 3, 9, 27, 81};

inline int trit_at(const uint8_t* trits, int64_t i) { return (trits[i / 5] / kPow3[i % 5]) % 3 - 1; }

// codes[t * d + c] of a row-ordered block's trits; codes needs G * d + 8 bytes (8-byte
// table stores).
void unpack_trits(const uint8_t* trits, const ternt::TritOrder& o, int8_t* codes) {
  const auto& lut = ternt::digit_tables().code5;
  const int64_t n = static_cast<int64_t>(o.G) * o.d, nb = (n + 4) / 5;
  for (int64_t i = 0; i < nb; ++i) std::memcpy(codes + 5 * i, lut[trits[i]], 8);
}

// o[c] += sig[c] * sum_t p[t] * code(t, c) in f32 over decoded tile codes: the rare
// inputs the integer kernels refuse (negative, NaN or inf p), which must propagate as in
// the reference.
void accum_tiles_float(const float* p, const int8_t* codes, const ternt::TritOrder& o, const float* sig, float* out) {
  const int nj = o.G / 4;
  for (int c = 0; c < o.d; ++c) {
    const int8_t* cu = codes + 64 * static_cast<int64_t>(c / 16) * nj + 4 * (c % 16);
    float s = 0.0f;
    for (int t = 0; t < o.G; ++t) s += p[t] * cu[64 * (t / 4) + t % 4];
    out[c] += sig[c] * s;
  }
}

class TernaryCodec final : public Codec {
 public:
  explicit TernaryCodec(const TernaryParams& p) : p_(p) {
    char thr[32];
    std::snprintf(thr, sizeof thr, "%g", p.thr);
    name_ = "ternary:G=" + std::to_string(p.group) + ",thr=" + thr + ",fit=" + ternary_fit_name(p.fit);
  }
  const std::string& name() const override { return name_; }
  Status check_head_dim(int head_dim) const override {
    return head_dim > 0 ? Status::ok() : invalid_argument(name_ + ": head_dim must be positive");
  }
  int tokens_per_block() const override { return p_.group; }
  int64_t block_bytes(int head_dim) const override {
    return 2 * static_cast<int64_t>(head_dim) + (static_cast<int64_t>(p_.group) * head_dim + 4) / 5;
  }
  // Code 0: |x| <= the threshold: thr*mean|x| <= thr*max|x| (mean, scale) or <= max|x| (opt);
  // code +-1: ||x| - scale| <= max(|x|, scale) <= max|x| (every fit's scale is a mean of
  // some |x|, <= max|x|; + f16 rounding).
  double error_bound() const override { return std::max(1.0, p_.thr) * (1.0 + 1.0 / 1024); }
  // Gaussian data, thr = 0.5: ~0.52 with fit mean (see the test); scale and opt lower the
  // squared error (least squares for their codes). Declared for thr <= 1 only.
  double rms_error_bound() const override { return p_.thr <= 1.0 ? 0.56 : -1.0; }

  // accumulate on tiles (AVX2 and up) rounds each block's p to 15 bits (ternary_tiles.h).
  FusedRounding fused_rounding(int head_dim) const override {
    return {0, ternt::trit_order(head_dim, p_.group).tiled && sign1::sign1_kernels().ternary_accum ? 15 : 0};
  }

  void encode(const float* x, int64_t x_stride, int head_dim, uint8_t* block) const override {
    const int d = head_dim, G = p_.group;
    const ternt::TritOrder order = ternt::trit_order(d, G);
    uint8_t* trits = block + 2 * d;
    const int64_t n = static_cast<int64_t>(G) * d;
    std::fill(trits, trits + (n + 4) / 5, uint8_t{0});
    std::vector<float> col(G), mag(G);
    for (int c = 0; c < d; ++c) {
      for (int t = 0; t < G; ++t) col[t] = x[t * x_stride + c];
      const float th = threshold(col.data(), mag.data());
      double fit_sum = 0;  // sum of |x| over the nonzero codes
      int fit_n = 0;
      for (int t = 0; t < G; ++t) {
        const float v = col[t];
        const int digit = v > th ? 2 : v < -th ? 0 : 1;
        if (digit != 1) {
          fit_sum += std::abs(v);
          ++fit_n;
        }
        const int64_t i = ternt::trit_index(order, t, c);
        trits[i / 5] = static_cast<uint8_t>(trits[i / 5] + digit * kPow3[i % 5]);
      }
      double mean_abs = 0;
      for (int t = 0; t < G; ++t) mean_abs += std::abs(col[t]);
      mean_abs /= G;
      // mean: VidKV's scale. scale/opt: the least-squares scale for these codes, the mean
      // |x| over the nonzero ones (mean|x| shrinks every reconstructed magnitude).
      const double scale = p_.fit == TernaryFit::kMean || fit_n == 0 ? mean_abs : fit_sum / fit_n;
      sign1::store_f16(block + 2 * c, static_cast<float>(scale));
    }
  }

  void decode(const uint8_t* block, int head_dim, float* x) const override {
    const int d = head_dim, G = p_.group;
    const ternt::TritOrder order = ternt::trit_order(d, G);
    const uint8_t* trits = block + 2 * d;
    for (int t = 0; t < G; ++t)
      for (int c = 0; c < d; ++c)
        x[static_cast<int64_t>(t) * d + c] = static_cast<float>(trit_at(trits, ternt::trit_index(order, t, c))) *
                                             sign1::load_f16(block + 2 * c);
  }

  void scores(const float* q, int n_q, const SegmentView& seg, float scale, float* logits,
              int64_t ld) const override {
    const int d = seg.head_dim, G = p_.group;
    const ternt::TritOrder order = ternt::trit_order(d, G);
    const sign1::Sign1Kernels& K = sign1::sign1_kernels();
    const bool tiles = order.tiled && K.ternary_decode, rows = !order.tiled && K.ternary_row_scores;
    thread_local std::vector<float> qs, sig;
    thread_local std::vector<int8_t> codes;
    qs.resize(d);
    sig.resize(d);
    codes.resize(static_cast<size_t>(G) * d + 8);
    for (int64_t b = 0; b < seg.n_blocks(); ++b) {
      const uint8_t* blk = seg.block(b);
      const uint8_t* trits = blk + 2 * d;
      if (tiles) K.ternary_decode(trits, order, codes.data());
      if (rows) unpack_trits(trits, order, codes.data());
      sign1::load_f16_row(blk, d, sig.data());
      for (int r = 0; r < n_q; ++r) {
        for (int c = 0; c < d; ++c) qs[c] = q[static_cast<int64_t>(r) * d + c] * sig[c];
        float* lr = logits + r * ld + b * G;
        if (tiles) {
          K.ternary_scores(qs.data(), codes.data(), order, scale, lr);
        } else if (rows) {
          K.ternary_row_scores(qs.data(), codes.data(), G, d, scale, lr);
        } else {  // scalar reference: the digits in place
          for (int t = 0; t < G; ++t) {
            float s = 0.0f;
            for (int c = 0; c < d; ++c) s += qs[c] * static_cast<float>(trit_at(trits, ternt::trit_index(order, t, c)));
            lr[t] = s * scale;
          }
        }
      }
    }
  }

  void accumulate(const float* p, int64_t ld, int n_q, const SegmentView& seg, float* out) const override {
    const int d = seg.head_dim, G = p_.group;
    const ternt::TritOrder order = ternt::trit_order(d, G);
    const sign1::Sign1Kernels& K = sign1::sign1_kernels();
    const bool tiles = order.tiled && K.ternary_decode, rows = !order.tiled && K.ternary_row_scores;
    thread_local std::vector<float> sig;
    thread_local std::vector<int8_t> codes;
    sig.resize(d);
    codes.resize(static_cast<size_t>(G) * d + 8);
    for (int64_t b = 0; b < seg.n_blocks(); ++b) {
      const uint8_t* blk = seg.block(b);
      const uint8_t* trits = blk + 2 * d;
      sign1::load_f16_row(blk, d, sig.data());
      if (tiles) K.ternary_decode(trits, order, codes.data());
      if (rows) unpack_trits(trits, order, codes.data());
      for (int r = 0; r < n_q; ++r) {
        const float* pr = p + r * ld + b * G;
        float* o = out + static_cast<int64_t>(r) * d;
        if (tiles) {
          if (!K.ternary_accum(pr, codes.data(), order, sig.data(), o))
            accum_tiles_float(pr, codes.data(), order, sig.data(), o);  // negative or non-finite p
        } else if (rows) {
          K.ternary_row_accum(pr, codes.data(), G, d, sig.data(), o);
        } else {  // scalar reference: the digits in place
          for (int c = 0; c < d; ++c) {
            float s = 0.0f;
            for (int t = 0; t < G; ++t) s += pr[t] * static_cast<float>(trit_at(trits, ternt::trit_index(order, t, c)));
            o[c] += sig[c] * s;
          }
        }
      }
    }
  }

 private:
  // Codes are nonzero where |x| > the returned threshold. col: [G] one channel's values,
  // mag: [G] scratch.
  float threshold(const float* col, float* mag) const {
    const int G = p_.group;
    for (int t = 0; t < G; ++t) mag[t] = std::abs(col[t]);
    if (p_.fit != TernaryFit::kOpt) {
      double s = 0;
      for (int t = 0; t < G; ++t) s += mag[t];
      // The stored mean|x| (f16) sets the threshold, as the decoder-side scale would.
      return static_cast<float>(p_.thr) * sign1::round_f16(static_cast<float>(s / G));
    }
    // opt: the m largest |x| nonzero, with m maximizing (sum of them)^2 / m, which
    // minimizes the squared error sum x^2 - (sum |x|)^2 / m at the best scale.
    std::sort(mag, mag + G, std::greater<float>());
    double sum = 0, best = 0;
    int best_m = 0;
    for (int m = 1; m <= G; ++m) {
      sum += mag[m - 1];
      if (sum * sum / m > best) {
        best = sum * sum / m;
        best_m = m;
      }
    }
    return best_m == G ? -1.0f : mag[best_m];  // nonzero: |x| > the (m+1)-th largest
  }

  TernaryParams p_;
  std::string name_;
};

}  // namespace

constexpr Choice<TernaryFit> kTernaryFits[] = {
    {"mean", TernaryFit::kMean}, {"scale", TernaryFit::kScale}, {"opt", TernaryFit::kOpt}};

Result<TernaryFit> parse_ternary_fit(std::string_view text, std::string_view codec) {
  return parse_choice(text, codec, "fit", kTernaryFits);
}

const char* ternary_fit_name(TernaryFit f) { return choice_name(f, kTernaryFits); }

Result<std::shared_ptr<const Codec>> make_ternary_codec(const TernaryParams& p) {
  VLKV_RETURN_IF_ERROR(check_token_group("ternary", p.group, false));
  if (!(p.thr >= 0.0 && p.thr <= 4.0))
    return invalid_argument("ternary: thr=" + std::to_string(p.thr) + " must be in [0, 4] (threshold / mean|x|)");
  return std::shared_ptr<const Codec>(std::make_shared<TernaryCodec>(p));
}

VLKV_REGISTER_CODEC(
    ternary,
    CodecInfo{"ternary",
              "ternary {-1,0,+1} per channel over G tokens, scale mean|x| (f16), threshold thr*scale; "
              "5 trits per byte",
              {{"G", "32", "tokens per group (1..256)"},
               {"thr", "0.5", "threshold as a multiple of the group's mean|x|"},
               {"fit", "mean", "codes and scale: mean (VidKV: threshold thr*mean|x|, scale mean|x|), scale (the same "
                               "codes, least-squares scale = mean|x| of the nonzero codes), opt (the least-squares "
                               "threshold and scale per channel; thr unused)"}},
              [](const Spec& s) -> Result<std::shared_ptr<const Codec>> {
                TernaryParams p;
                VLKV_ASSIGN_OR_RETURN(p.group, parse_token_group(s));
                VLKV_ASSIGN_OR_RETURN(p.thr, s.get_double("thr", 0.5, 0.0, 4.0));
                VLKV_ASSIGN_OR_RETURN(p.fit, parse_ternary_fit(s.get_string("fit", "mean"), s.to_string()));
                return make_ternary_codec(p);
              }});

}  // namespace vlkv
