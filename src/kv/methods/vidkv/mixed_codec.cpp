// mixk: per-block mixed 2-bit / 1-bit channel maps for keys (VidKV; see sign1_codecs.h).
// Block of G tokens, head_dim d, n_out = round(frac*d) outlier channels, n_norm = d - n_out
// normal channels, nc = n_norm (fft none/real) or 2*n_norm (complex) coefficients:
//   [ceil(d/8)] bytes     channel map: bit c = 1 iff channel c is an outlier (2-bit) channel
//   [n_out] {f16, f16}    per outlier channel (ascending channel order): scale s, min m
//   [nc] f16              per normal coefficient: sigma = mean_t |c_tk|
//   [n_out][G/8] bits     low bit planes of the 2-bit codes
//   [n_out][G/8] bits     high bit planes
//   [nc][G/8] bits        sign planes of the normal coefficients (1 = negative)
// Outlier channels = the n_out largest ranges (max - min over the block; ties -> lower
// channel). 2-bit: code = clamp(round((x - m)/s), 0, 3), s = (max - min)/3, x^ = m + s*code.
// Normal channels: gathered in ascending order per token, transformed (sign1_transform.h),
// 1-bit coded like sign1c. Every plane is read by the shared bit-plane kernels:
//   scores: q.x^ = sum_O q m + sum_N' qc sigma + sum_O q s (lo + 2 hi) - 2 sum_N' qc sigma neg
// where qc = T^T q over the block's normal channels. The map varies per block, so the query
// transform (scores) and the synthesis (accumulate) are redone only when the map changes
// from one block to the next (keys' outlier channels are stable in practice).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

#include "kv/codec_registry.h"
#include "kv/methods/vidkv/sign1_kernels.h"
#include "kv/methods/vidkv/sign1_codecs.h"
#include "kv/methods/vidkv/sign1_planes.h"

namespace vlkv {
namespace {

using sign1::CoefTransform;
using sign1::FftMode;

struct Layout {
  int d, G, n_out, n_norm, nc, mask_bytes;
  int64_t meta, sig, planes, bytes;
};

// Channel lists of a block's map.
struct ChannelMap {
  std::vector<int> out, norm;  // ascending
  // Branch-free: the map is data (random on noise), a branch per channel mispredicts half the time.
  void read(const uint8_t* mask, int d) {
    out.resize(d + 1);
    norm.resize(d + 1);
    int no = 0, nn = 0;
    for (int c = 0; c < d; ++c) {
      const int bit = (mask[c / 8] >> (c % 8)) & 1;
      out[no] = c;
      norm[nn] = c;
      no += bit;
      nn += 1 - bit;
    }
    out.resize(no);
    norm.resize(nn);
  }
};

class MixkCodec final : public Codec {
 public:
  explicit MixkCodec(const MixkParams& p) : p_(p) {
    char frac[32];
    std::snprintf(frac, sizeof frac, "%g", p.frac);
    name_ = "mixk:G=" + std::to_string(p.group) + ",frac=" + frac + ",fft=" + sign1::fft_mode_name(p.fft);
  }
  const std::string& name() const override { return name_; }
  Status check_head_dim(int head_dim) const override { return RealFft::check_head_dim(name_, head_dim); }
  int tokens_per_block() const override { return p_.group; }
  int64_t block_bytes(int head_dim) const override { return layout(head_dim).bytes; }
  // Outlier channels: s/2 <= max|x|/3 (+ f16 rounding); normal channels as sign1c.
  double error_bound() const override {
    return p_.fft == FftMode::kNone ? 1.0 + 1.0 / 1024 : std::sqrt(256.0 * RealFft::kMaxN) + 1.0;
  }
  // Gaussian data at frac = 0.5: ~0.47 (see the test). Declared for frac >= 0.25 only.
  double rms_error_bound() const override { return p_.frac >= 0.25 ? 0.55 : 0.66; }

  Layout layout(int d) const {
    Layout l;
    l.d = d;
    l.G = p_.group;
    l.n_out = std::clamp(static_cast<int>(std::lround(p_.frac * d)), 0, d);
    l.n_norm = d - l.n_out;
    l.nc = p_.fft == FftMode::kComplex ? 2 * l.n_norm : l.n_norm;
    l.mask_bytes = (d + 7) / 8;
    l.meta = l.mask_bytes;
    l.sig = l.meta + 4 * static_cast<int64_t>(l.n_out);
    l.planes = l.sig + 2 * static_cast<int64_t>(l.nc);
    l.bytes = l.planes + static_cast<int64_t>(2 * l.n_out + l.nc) * (l.G / 8);
    return l;
  }

  void encode(const float* x, int64_t x_stride, int head_dim, uint8_t* block) const override {
    const Layout L = layout(head_dim);
    const int d = L.d, G = L.G, stride = G / 8;
    std::fill(block, block + L.bytes, uint8_t{0});
    // Channel map: the n_out largest ranges.
    std::vector<float> mn(d), mx(d);
    for (int c = 0; c < d; ++c) {
      mn[c] = mx[c] = x[c];
      for (int t = 1; t < G; ++t) {
        mn[c] = std::min(mn[c], x[t * x_stride + c]);
        mx[c] = std::max(mx[c], x[t * x_stride + c]);
      }
    }
    std::vector<int> order(d);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return mx[a] - mn[a] > mx[b] - mn[b]; });
    for (int i = 0; i < L.n_out; ++i) block[order[i] / 8] |= uint8_t(1u << (order[i] % 8));
    ChannelMap map;
    map.read(block, d);
    uint8_t* planes = block + L.planes;
    // Outlier channels: 2-bit min-max, codes from the stored (rounded) scale and min.
    for (int j = 0; j < L.n_out; ++j) {
      const int c = map.out[j];
      sign1::store_f16(block + L.meta + 4 * j, (mx[c] - mn[c]) / 3.0f);
      sign1::store_f16(block + L.meta + 4 * j + 2, mn[c]);
      const float s = sign1::load_f16(block + L.meta + 4 * j), m = sign1::load_f16(block + L.meta + 4 * j + 2);
      for (int t = 0; t < G; ++t) {
        const int code = s > 0.0f ? std::clamp(static_cast<int>(std::lround((x[t * x_stride + c] - m) / s)), 0, 3) : 0;
        if (code & 1) planes[static_cast<int64_t>(j) * stride + t / 8] |= uint8_t(1u << (t % 8));
        if (code & 2) planes[static_cast<int64_t>(L.n_out + j) * stride + t / 8] |= uint8_t(1u << (t % 8));
      }
    }
    if (L.n_norm == 0) return;
    // Normal channels: gather, transform, 1-bit.
    const auto& T = sign1::coef_transform(p_.fft, L.n_norm);
    std::vector<float> xn(L.n_norm), coef(static_cast<size_t>(G) * L.nc);  // [G, nc]
    for (int t = 0; t < G; ++t) {
      for (int k = 0; k < L.n_norm; ++k) xn[k] = x[t * x_stride + map.norm[k]];
      T.analyze(xn.data(), &coef[static_cast<size_t>(t) * L.nc]);
    }
    uint8_t* sp = planes + static_cast<int64_t>(2 * L.n_out) * stride;
    for (int k = 0; k < L.nc; ++k) {
      double a = 0;
      for (int t = 0; t < G; ++t) a += std::abs(coef[static_cast<size_t>(t) * L.nc + k]);
      sign1::store_f16(block + L.sig + 2 * k, static_cast<float>(a / G));
      for (int t = 0; t < G; ++t)
        if (coef[static_cast<size_t>(t) * L.nc + k] < 0.0f) sp[static_cast<int64_t>(k) * stride + t / 8] |= uint8_t(1u << (t % 8));
    }
  }

  void decode(const uint8_t* block, int head_dim, float* x) const override {
    const Layout L = layout(head_dim);
    const int d = L.d, G = L.G;
    ChannelMap map;
    map.read(block, d);
    const uint8_t* planes = block + L.planes;
    std::vector<float> c(std::max(L.nc, 1)), xn(std::max(L.n_norm, 1));
    for (int t = 0; t < G; ++t) {
      float* xt = x + static_cast<int64_t>(t) * d;
      for (int j = 0; j < L.n_out; ++j) {
        const int code = sign1::plane_bit(planes, G, j, t) + 2 * sign1::plane_bit(planes, G, L.n_out + j, t);
        xt[map.out[j]] = sign1::load_f16(block + L.meta + 4 * j + 2) + sign1::load_f16(block + L.meta + 4 * j) * code;
      }
      if (L.n_norm == 0) continue;
      for (int k = 0; k < L.nc; ++k) {
        const float s = sign1::load_f16(block + L.sig + 2 * k);
        c[k] = sign1::plane_bit(planes, G, 2 * L.n_out + k, t) ? -s : s;
      }
      sign1::coef_transform(p_.fft, L.n_norm).synthesize(c.data(), xn.data());
      for (int k = 0; k < L.n_norm; ++k) xt[map.norm[k]] = xn[k];
    }
  }

  // Blocks go in chunks of kChunk: first every block whose map differs from the block
  // before gets a query slot (its rows split by the map, the normal parts transformed 8 at
  // a time in SIMD lanes: random keys change the map every block, and one transform per
  // row and block would cost more than the block's plane sums); then every block's plane
  // weights and scores from its slot.
  void scores(const float* q, int n_q, const SegmentView& seg, float scale, float* logits,
              int64_t ld) const override {
    constexpr int kChunk = 8;
    const Layout L = layout(seg.head_dim);
    const int d = L.d, G = L.G, n_planes = 2 * L.n_out + L.nc;
    const CoefTransform* T = L.n_norm > 0 ? &sign1::coef_transform(p_.fft, L.n_norm) : nullptr;
    const sign1::Sign1Kernels& K = sign1::sign1_kernels();
    const size_t per_slot = static_cast<size_t>(n_q) * (L.n_out + L.nc);
    thread_local std::vector<float> buf;
    thread_local std::vector<uint8_t> cur_mask;
    buf.resize((kChunk + 1) * per_slot + static_cast<size_t>(n_q) * (n_planes + 1) + static_cast<size_t>(d + 16) +
               2 * static_cast<size_t>(L.n_out) + L.nc + 8 * static_cast<size_t>(d + 16 + L.nc) + 1);
    float* slots = buf.data();  // [kChunk + 1][n_q][n_out + nc] query at outlier channels, transformed normal part;
                                // slot kChunk: the map carried over from the previous chunk
    float* w = slots + (kChunk + 1) * per_slot;             // [n_q, n_planes] plane weights
    float* base = w + static_cast<size_t>(n_q) * n_planes;  // [n_q] score of all-zero bits
    float* qs = base + n_q;                                 // [d + 16] outlier gather
    float* os = qs + d + 16;                                // [n_out, 2] outlier {scale, min}
    float* sig = os + 2 * L.n_out;                          // [nc]
    float* lanes_in = sig + L.nc;                           // [8][d + 16] queued normal parts
    float* lanes_out = lanes_in + 8 * static_cast<size_t>(d + 16);  // [8][nc] their transforms
    auto qo_of = [&](int slot, int r) { return slots + slot * per_slot + static_cast<size_t>(r) * (L.n_out + L.nc); };
    int lane_slot[8], lane_row[8], n_lanes = 0;
    auto run_lanes = [&] {  // transform the queued normal parts into their slots
      if (n_lanes == 0) return;
      for (int l = n_lanes; l < 8; ++l) std::fill_n(lanes_in + l * static_cast<size_t>(d + 16), L.n_norm, 0.0f);
      T->adjoint_batch8(lanes_in, d + 16, lanes_out, L.nc);
      for (int l = 0; l < n_lanes; ++l)
        std::memcpy(qo_of(lane_slot[l], lane_row[l]) + L.n_out, lanes_out + static_cast<size_t>(l) * L.nc,
                    sizeof(float) * L.nc);
      n_lanes = 0;
    };
    cur_mask.clear();
    int slot_of[kChunk];
    for (int64_t b0 = 0; b0 < seg.n_blocks(); b0 += kChunk) {
      const int nb = static_cast<int>(std::min<int64_t>(kChunk, seg.n_blocks() - b0));
      int last = kChunk;
      for (int i = 0; i < nb; ++i) {
        const uint8_t* blk = seg.block(b0 + i);
        if (cur_mask.empty() || std::memcmp(cur_mask.data(), blk, L.mask_bytes) != 0) {
          cur_mask.assign(blk, blk + L.mask_bytes);
          last = i;
          for (int r = 0; r < n_q; ++r) {
            // The normal part goes straight to the next transform lane.
            K.mixk_split_query(q + static_cast<int64_t>(r) * d, blk, d, qs, lanes_in + n_lanes * static_cast<size_t>(d + 16));
            std::memcpy(qo_of(i, r), qs, sizeof(float) * L.n_out);
            if (!T) continue;
            lane_slot[n_lanes] = i;
            lane_row[n_lanes] = r;
            if (++n_lanes == 8) run_lanes();
          }
        }
        slot_of[i] = last;
      }
      run_lanes();
      for (int i = 0; i < nb; ++i) {
        const uint8_t* blk = seg.block(b0 + i);
        sign1::load_f16_row(blk + L.meta, 2 * L.n_out, os);  // os[2j] scale, os[2j+1] min
        sign1::load_f16_row(blk + L.sig, L.nc, sig);
        for (int r = 0; r < n_q; ++r) {
          const float* qo = qo_of(slot_of[i], r);
          K.mixk_row_weights(qo, qo + L.n_out, os, sig, L.n_out, L.nc, w + static_cast<size_t>(r) * n_planes, base + r);
        }
        if (K.mixk_plane_scores_rows)
          K.mixk_plane_scores_rows(blk + L.planes, L.n_out, L.nc, G, w, base, n_q, scale, logits + (b0 + i) * G, ld);
        else
          K.plane_scores_rows(blk + L.planes, n_planes, G, w, base, n_q, scale, logits + (b0 + i) * G, ld);
      }
      if (last != kChunk) std::memcpy(slots + kChunk * per_slot, slots + last * per_slot, sizeof(float) * per_slot);
    }
  }

  void accumulate(const float* p, int64_t ld, int n_q, const SegmentView& seg, float* out) const override {
    const Layout L = layout(seg.head_dim);
    const int d = L.d, G = L.G, n_planes = 2 * L.n_out + L.nc;
    const CoefTransform* T = L.n_norm > 0 ? &sign1::coef_transform(p_.fft, L.n_norm) : nullptr;
    thread_local std::vector<float> buf;
    thread_local ChannelMap map;
    thread_local std::vector<uint8_t> cur_mask;
    buf.resize(static_cast<size_t>(n_q) * L.nc + L.n_norm + n_planes + 2 * static_cast<size_t>(L.n_out) + L.nc + 1);
    float* y = buf.data();                              // [n_q, nc] normal coefficients since the last map change
    float* xn = y + static_cast<size_t>(n_q) * L.nc;    // [n_norm]
    float* u = xn + L.n_norm;                           // [n_planes]
    float* os = u + n_planes;                           // [n_out, 2] outlier {scale, min}
    float* sig = os + 2 * L.n_out;                      // [nc]
    auto flush = [&] {  // out[normal channels] += T y
      if (!T || cur_mask.empty()) return;
      for (int r = 0; r < n_q; ++r) {
        T->synthesize(y + static_cast<size_t>(r) * L.nc, xn);
        float* o = out + static_cast<int64_t>(r) * d;
        for (int k = 0; k < L.n_norm; ++k) o[map.norm[k]] += xn[k];
      }
    };
    cur_mask.clear();
    for (int64_t b = 0; b < seg.n_blocks(); ++b) {
      const uint8_t* blk = seg.block(b);
      if (cur_mask.empty() || std::memcmp(cur_mask.data(), blk, L.mask_bytes) != 0) {
        flush();
        cur_mask.assign(blk, blk + L.mask_bytes);
        map.read(blk, d);
        std::fill(y, y + static_cast<size_t>(n_q) * L.nc, 0.0f);
      }
      sign1::load_f16_row(blk + L.meta, 2 * L.n_out, os);
      sign1::load_f16_row(blk + L.sig, L.nc, sig);
      for (int r = 0; r < n_q; ++r) {
        const float* pr = p + r * ld + b * G;
        float P = 0.0f;
        for (int t = 0; t < G; ++t) P += pr[t];
        sign1::plane_sums(blk + L.planes, n_planes, G, pr, u);
        float* o = out + static_cast<int64_t>(r) * d;
        for (int j = 0; j < L.n_out; ++j)
          o[map.out[j]] += os[2 * j + 1] * P + os[2 * j] * (u[j] + 2.0f * u[L.n_out + j]);
        float* yr = y + static_cast<size_t>(r) * L.nc;
        for (int k = 0; k < L.nc; ++k) yr[k] += sig[k] * (P - 2.0f * u[2 * L.n_out + k]);
      }
    }
    flush();
  }

 private:
  MixkParams p_;
  std::string name_;
};

}  // namespace

Result<std::shared_ptr<const Codec>> make_mixk_codec(const MixkParams& p) {
  VLKV_RETURN_IF_ERROR(check_token_group("mixk", p.group, true));
  if (!(p.frac >= 0.0 && p.frac <= 1.0))
    return invalid_argument("mixk: frac=" + std::to_string(p.frac) + " must be in [0, 1] (share of 2-bit channels)");
  return std::shared_ptr<const Codec>(std::make_shared<MixkCodec>(p));
}

VLKV_REGISTER_CODEC(
    mixk,
    CodecInfo{"mixk",
              "keys: per block of G tokens, the frac of channels with the largest range 2-bit min-max, "
              "the rest 1-bit sign + mean|x| (optionally after an FFT across them); channel map stored",
              {{"G", "32", kBitPlaneGroupHelp},
               {"frac", "0.5", "share of channels kept at 2 bits (largest max-min range in the group)"},
               {"fft", "none", "transform across the 1-bit channels: none, real (half spectrum, same budget), "
                               "complex (full spectrum Re+Im, 2x cost)"}},
              [](const Spec& s) -> Result<std::shared_ptr<const Codec>> {
                MixkParams p;
                VLKV_ASSIGN_OR_RETURN(p.group, parse_token_group(s));
                VLKV_ASSIGN_OR_RETURN(p.frac, s.get_double("frac", 0.5, 0.0, 1.0));
                VLKV_ASSIGN_OR_RETURN(p.fft, sign1::parse_fft_mode(s.get_string("fft", "none"), s.to_string()));
                return make_mixk_codec(p);
              }});

}  // namespace vlkv
