#include "quant/k_quant_search.h"

#include <algorithm>
#include <cmath>

#include "quant/quant_internal.h"

namespace vlkv::quant {

void quantize_scale_min_k(const float* src, int n_max, uint8_t* p, uint8_t* L) {
  float scales[8], mins[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    scales[j] = fit_scale_min(src + 32 * j, 32, n_max, L + 32 * j, &mins[j]);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * scales[j])));
    lm[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * mins[j])));
  }
  store_half(p, max_scale / 63.0f);
  store_half(p + 2, max_min / 63.0f);
  pack_scale_min_k4(ls, lm, p + 4);
  const float d = load_half(p), dmin = load_half(p + 2);
  for (int j = 0; j < 8; ++j) {
    const float ds = d * ls[j], dm = dmin * lm[j];
    for (int i = 0; i < 32; ++i) {
      const int l = ds != 0.0f ? nearest_int((src[32 * j + i] + dm) / ds) : 0;
      L[32 * j + i] = static_cast<uint8_t>(std::clamp(l, 0, n_max));
    }
  }
}

float fit_scale_min(const float* x, int n, int n_max, uint8_t* L, float* min_out) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  lo = std::min(lo, 0.0f);  // the offset is subtracted: only a non-positive lower end is representable
  if (hi <= lo) {
    std::fill(L, L + n, uint8_t{0});
    *min_out = -lo;
    return 0.0f;
  }
  float best_err = INFINITY, best_scale = (hi - lo) / n_max, best_min = -lo;
  uint8_t Lt[256];
  // Candidate step counts around n_max (as ggml's make_qkx2_quants does with rdelta),
  // each followed by a least-squares refit of (scale, offset) for the chosen codes.
  for (int step = -4; step <= 8; ++step) {
    const float iscale = (n_max + 0.1f * step) / (hi - lo);
    double sl = 0, sll = 0, sx = 0, slx = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - lo)), 0, n_max);
      Lt[i] = static_cast<uint8_t>(l);
      sl += l;
      sll += static_cast<double>(l) * l;
      sx += x[i];
      slx += l * static_cast<double>(x[i]);
    }
    const double det = n * sll - sl * sl;
    if (det <= 0) continue;
    double scale = (n * slx - sl * sx) / det;
    double off = (sll * sx - sl * slx) / det;  // x ~ scale * l + off
    if (off > 0) {  // not representable: pin the offset at 0 and refit the scale
      off = 0;
      scale = sll > 0 ? slx / sll : 0;
    }
    if (scale <= 0) continue;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double e = scale * Lt[i] + off - x[i];
      err += e * e;
    }
    if (err < best_err) {
      best_err = static_cast<float>(err);
      best_scale = static_cast<float>(scale);
      best_min = static_cast<float>(-off);
      std::copy(Lt, Lt + n, L);
    }
  }
  if (!(best_err < INFINITY)) {  // fall back to plain min/max
    const float iscale = n_max / (hi - lo);
    for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - lo)), 0, n_max));
  }
  *min_out = best_min;
  return best_scale;
}

float fit_scale_symmetric(const float* x, int n, int n_neg, int8_t* L) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax == 0) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  float best_err = INFINITY, best_scale = 0;
  int8_t Lt[256];
  for (int step = -9; step <= 9; ++step) {
    const float iscale = -(n_neg + 0.1f * step) / max;
    double slx = 0, sll = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * x[i]), -n_neg, n_neg - 1);
      Lt[i] = static_cast<int8_t>(l);
      slx += l * static_cast<double>(x[i]);
      sll += static_cast<double>(l) * l;
    }
    if (sll <= 0) continue;
    const double scale = slx / sll;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double e = scale * Lt[i] - x[i];
      err += e * e;
    }
    if (err < best_err) {
      best_err = static_cast<float>(err);
      best_scale = static_cast<float>(scale);
      std::copy(Lt, Lt + n, L);
    }
  }
  return best_scale;
}

}  // namespace vlkv::quant
