// The 1-bit, ternary and mixed 2/1-bit per-channel codecs (VidKV's building blocks),
// registered by name; this header documents their specs and layouts and lets a
// method build one from typed parameters instead of a string.
//
//  spec                                   tokens/block  bits/elem @ head_dim 128, G=32
//  sign1c:G=32,fft=none|real|complex      G             1.5 (none, real) | 3.0 (complex)
//      per channel over G tokens: sign bit + f16 scale = mean|c| per (coefficient, group),
//      dequantized to +-scale. fft=real: per token, orthonormal half-spectrum real DFT over
//      all head_dim channels first (same budget); fft=complex: the released code's full
//      complex spectrum, Re and Im coded separately (2x coefficients, 2x cost).
//  ternary:G=32,thr=0.5,fit=mean|scale|opt  G          2.1016 (1.6016 trits + 0.5 scales)
//      per channel over G tokens: codes {-1,0,+1}, one f16 scale, dequantized to
//      code*scale; 5 trits per byte, ceil(G*head_dim/5) bytes. fit=mean (VidKV): threshold
//      thr*mean|x|, scale mean|x|; scale: the same codes, scale = mean|x| of the nonzero
//      codes (least squares); opt: threshold and scale minimizing the squared error.
//  mixk:G=32,frac=0.5,fft=none|real|complex  G          2.28125 (none, real) | 3.03 (complex)
//      per block of G tokens: the round(frac*head_dim) channels of largest range (max-min
//      over the block) are 2-bit min-max (f16 scale + f16 min per channel), the rest 1-bit
//      sign + mean|c| scale, optionally after an FFT across those "normal" channels; the
//      channel map (head_dim bits) is stored in the block.
//
// G: tokens per group, a multiple of 8 in [8, 256] for sign1c/mixk (bit planes are whole
// bytes), any value in [1, 256] for ternary. All fields are byte-packed f16/bit fields; no
// alignment. Exact block layouts are described at each codec.
#pragma once

#include <memory>
#include <string_view>

#include "kv/codec.h"
#include "kv/methods/vidkv/sign1_transform.h"

namespace vlkv {

struct Sign1cParams {
  int group = 32;                            // G: tokens per block
  sign1::FftMode fft = sign1::FftMode::kNone;
};
// How the ternary codec picks a channel's codes and scale over a group:
//  kMean  (VidKV) threshold thr*mean|x|, scale mean|x|
//  kScale the same codes, scale = mean|x| over the nonzero codes (least squares for them)
//  kOpt   threshold and scale minimizing the group's squared error (thr unused)
enum class TernaryFit { kMean, kScale, kOpt };
Result<TernaryFit> parse_ternary_fit(std::string_view text, std::string_view codec);
const char* ternary_fit_name(TernaryFit f);

struct TernaryParams {
  int group = 32;        // G: tokens per block
  double thr = 0.5;      // threshold = thr * mean|x| over the group (kMean, kScale)
  TernaryFit fit = TernaryFit::kMean;
};
struct MixkParams {
  int group = 32;                            // G: tokens per block
  double frac = 0.5;                         // share of channels kept at 2 bits
  sign1::FftMode fft = sign1::FftMode::kNone;  // transform of the 1-bit channels
};

// The token group G of the three codecs: its help, its value in a codec spec ("G", default 32),
// and the check of a built one (`whole_bytes`: sign1c and mixk store bit planes of G tokens).
inline constexpr const char* kBitPlaneGroupHelp = "tokens per group (multiple of 8, 8..256)";
Result<int> parse_token_group(const Spec& s);
Status check_token_group(const char* codec, int group, bool whole_bytes);

Result<std::shared_ptr<const Codec>> make_sign1c_codec(const Sign1cParams& p);
Result<std::shared_ptr<const Codec>> make_ternary_codec(const TernaryParams& p);
Result<std::shared_ptr<const Codec>> make_mixk_codec(const MixkParams& p);

}  // namespace vlkv
