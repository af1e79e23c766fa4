// sign1c: 1-bit sign + per-(coefficient, group) scale over G tokens, with an optional
// FFT across the channels (see sign1_codecs.h).
//
// Block of G tokens (nc = n_coef: head_dim, or 2*head_dim for fft=complex):
//   [nc] f16        sigma_k = mean_t |c_tk|  (c_t = coefficients of token t)
//   [nc][G/8] bits  plane k, bit t = 1 iff c_tk < 0
// decode: c^_tk = bit ? -sigma_k : +sigma_k;  x_t = T c^_t
// scores: with qc = T^T q,  dot(q, x_t) = sum_k qc_k sigma_k - 2 sum_{k: bit} qc_k sigma_k
// accumulate: sum_t p_t c^_tk = sigma_k (P - 2 sum_{t: bit} p_t), P = sum_t p_t; summed
//   over the view in coefficient space, then one synthesis per query row (T is linear).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kv/codec_registry.h"
#include "kv/methods/vidkv/sign1_codecs.h"
#include "kv/methods/vidkv/sign1_planes.h"

namespace vlkv {
namespace {

using sign1::FftMode;

class Sign1cCodec final : public Codec {
 public:
  explicit Sign1cCodec(const Sign1cParams& p) : p_(p) {
    name_ = "sign1c:G=" + std::to_string(p.group) + ",fft=" + sign1::fft_mode_name(p.fft);
  }
  const std::string& name() const override { return name_; }
  Status check_head_dim(int head_dim) const override { return RealFft::check_head_dim(name_, head_dim); }
  int tokens_per_block() const override { return p_.group; }
  int64_t block_bytes(int head_dim) const override {
    const int64_t nc = n_coef(head_dim);
    return 2 * nc + nc * (p_.group / 8);
  }
  // |c^ - c| <= max over the group of |c| per coefficient. Without a transform that is
  // max|x| (+ f16 rounding of the scale); through an orthonormal (or the complex) transform
  // the per-element error can reach sqrt(G * head_dim) * max|x|: a true but useless bound,
  // so rms_error_bound() is the meaningful one there.
  double error_bound() const override { return p_.fft == FftMode::kNone ? 1.0 + 1.0 / 1024 : bound_fft_; }
  // Gaussian data: E(|x| - E|x|)^2 / E x^2 = 1 - 2/pi -> 0.603 (a bit more at finite G).
  double rms_error_bound() const override { return 0.66; }

  void encode(const float* x, int64_t x_stride, int head_dim, uint8_t* block) const override {
    const auto& T = sign1::coef_transform(p_.fft, head_dim);
    const int nc = T.n_coef(), G = p_.group, stride = G / 8;
    std::vector<float> c(static_cast<size_t>(G) * nc);  // [G, nc] coefficients
    for (int t = 0; t < G; ++t) T.analyze(x + t * x_stride, &c[static_cast<size_t>(t) * nc]);
    uint8_t* planes = block + 2 * nc;
    std::fill(planes, planes + static_cast<int64_t>(nc) * stride, uint8_t{0});
    for (int k = 0; k < nc; ++k) {
      double s = 0;
      for (int t = 0; t < G; ++t) s += std::abs(c[static_cast<size_t>(t) * nc + k]);
      sign1::store_f16(block + 2 * k, static_cast<float>(s / G));
      for (int t = 0; t < G; ++t)
        if (c[static_cast<size_t>(t) * nc + k] < 0.0f) planes[k * stride + t / 8] |= uint8_t(1u << (t % 8));
    }
  }

  void decode(const uint8_t* block, int head_dim, float* x) const override {
    const auto& T = sign1::coef_transform(p_.fft, head_dim);
    const int nc = T.n_coef(), G = p_.group;
    const uint8_t* planes = block + 2 * nc;
    std::vector<float> c(nc);
    for (int t = 0; t < G; ++t) {
      for (int k = 0; k < nc; ++k) {
        const float s = sign1::load_f16(block + 2 * k);
        c[k] = sign1::plane_bit(planes, G, k, t) ? -s : s;
      }
      T.synthesize(c.data(), x + static_cast<int64_t>(t) * head_dim);
    }
  }

  void scores(const float* q, int n_q, const SegmentView& seg, float scale, float* logits,
              int64_t ld) const override {
    const int d = seg.head_dim, G = p_.group;
    const auto& T = sign1::coef_transform(p_.fft, d);
    const int nc = T.n_coef();
    thread_local std::vector<float> buf;
    buf.resize(2 * static_cast<size_t>(n_q) * nc + nc + n_q);
    float* qc = buf.data();                              // [n_q, nc] transformed queries
    float* w = qc + static_cast<size_t>(n_q) * nc;       // [n_q, nc] plane weights
    float* sig = w + static_cast<size_t>(n_q) * nc;      // [nc] block scales
    float* base = sig + nc;                              // [n_q] score of all-zero bits
    for (int r = 0; r < n_q; ++r) T.adjoint(q + static_cast<int64_t>(r) * d, qc + static_cast<size_t>(r) * nc);
    for (int64_t b = 0; b < seg.n_blocks(); ++b) {
      const uint8_t* blk = seg.block(b);
      sign1::load_f16_row(blk, nc, sig);
      for (int r = 0; r < n_q; ++r) {
        const float* qr = qc + static_cast<size_t>(r) * nc;
        float* wr = w + static_cast<size_t>(r) * nc;
        float s = 0.0f;
        for (int k = 0; k < nc; ++k) {
          const float qs = qr[k] * sig[k];
          s += qs;
          wr[k] = -2.0f * qs;
        }
        base[r] = s;
      }
      sign1::plane_scores_rows(blk + 2 * nc, nc, G, w, base, n_q, scale, logits + b * G, ld);
    }
  }

  void accumulate(const float* p, int64_t ld, int n_q, const SegmentView& seg, float* out) const override {
    const int d = seg.head_dim, G = p_.group;
    const auto& T = sign1::coef_transform(p_.fft, d);
    const int nc = T.n_coef();
    thread_local std::vector<float> buf;
    buf.resize(static_cast<size_t>(n_q) * nc + 2 * nc + d);
    float* y = buf.data();                          // [n_q, nc] accumulated coefficients
    float* sig = y + static_cast<size_t>(n_q) * nc;  // [nc]
    float* u = sig + nc;                            // [nc] masked sums of p
    float* x = u + nc;                              // [d]
    std::fill(y, y + static_cast<size_t>(n_q) * nc, 0.0f);
    for (int64_t b = 0; b < seg.n_blocks(); ++b) {
      const uint8_t* blk = seg.block(b);
      sign1::load_f16_row(blk, nc, sig);
      for (int r = 0; r < n_q; ++r) {
        const float* pr = p + r * ld + b * G;
        float P = 0.0f;
        for (int t = 0; t < G; ++t) P += pr[t];
        sign1::plane_sums(blk + 2 * nc, nc, G, pr, u);
        float* yr = y + static_cast<size_t>(r) * nc;
        for (int k = 0; k < nc; ++k) yr[k] += sig[k] * (P - 2.0f * u[k]);
      }
    }
    for (int r = 0; r < n_q; ++r) {
      T.synthesize(y + static_cast<size_t>(r) * nc, x);
      float* o = out + static_cast<int64_t>(r) * d;
      for (int i = 0; i < d; ++i) o[i] += x[i];
    }
  }

 private:
  int n_coef(int head_dim) const { return p_.fft == FftMode::kComplex ? 2 * head_dim : head_dim; }

  Sign1cParams p_;
  std::string name_;
  // sqrt(G * n) * max|x| bounds the per-element error through the transform; n <= kMaxN.
  double bound_fft_ = std::sqrt(256.0 * RealFft::kMaxN) + 1.0;
};

}  // namespace

Result<int> parse_token_group(const Spec& s) {
  VLKV_ASSIGN_OR_RETURN(const int64_t g, s.get_int("G", 32, 1, 1 << 20));
  return static_cast<int>(g);
}

Status check_token_group(const char* codec, int group, bool whole_bytes) {
  if (whole_bytes && (group < 8 || group > 256 || group % 8 != 0))
    return invalid_argument(std::string(codec) + ": G=" + std::to_string(group) +
                            " must be a multiple of 8 in [8, 256] (tokens per group; bit planes are whole bytes)");
  if (group < 1 || group > 256)
    return invalid_argument(std::string(codec) + ": G=" + std::to_string(group) +
                            " must be in [1, 256] (tokens per group)");
  return Status::ok();
}

Result<std::shared_ptr<const Codec>> make_sign1c_codec(const Sign1cParams& p) {
  VLKV_RETURN_IF_ERROR(check_token_group("sign1c", p.group, true));
  return std::shared_ptr<const Codec>(std::make_shared<Sign1cCodec>(p));
}

VLKV_REGISTER_CODEC(
    sign1c,
    CodecInfo{"sign1c",
              "1-bit sign per channel over G tokens, scale mean|x| (f16), dequantized to +-scale; "
              "optional FFT across channels",
              {{"G", "32", kBitPlaneGroupHelp},
               {"fft", "none", "transform across channels before 1-bit coding: none, real (half spectrum, "
                               "same budget), complex (full spectrum Re+Im, 2x cost)"}},
              [](const Spec& s) -> Result<std::shared_ptr<const Codec>> {
                Sign1cParams p;
                VLKV_ASSIGN_OR_RETURN(p.group, parse_token_group(s));
                VLKV_ASSIGN_OR_RETURN(p.fft, sign1::parse_fft_mode(s.get_string("fft", "none"), s.to_string()));
                return make_sign1c_codec(p);
              }});

}  // namespace vlkv
