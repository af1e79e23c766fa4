#include "vision/qwen2vl_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "gguf/gguf_optional.h"
#include "kernels/ops.h"
#include "vision/vit_common_image.h"

namespace vlkv {

std::string ImageTokenBounds::check() const {
  constexpr int64_t kMost = int64_t{1} << 20;
  if (min < 1 || max < 1 || min > kMost || max > kMost)
    return "image tokens per image must be 1 to " + std::to_string(kMost) + " (min " + std::to_string(min) + ", max " +
           std::to_string(max) + ")";
  if (min > max)
    return "--image-min-tokens " + std::to_string(min) + " is above --image-max-tokens " + std::to_string(max);
  return "";
}

Qwen2VlSize qwen2vl_target_size(int32_t width, int32_t height, int32_t align, int64_t min_pixels, int64_t max_pixels) {
  const float f = static_cast<float>(align);
  auto round_by = [&](float x) { return static_cast<int32_t>(std::round(x / f)) * align; };
  auto ceil_by = [&](float x) { return static_cast<int32_t>(std::ceil(x / f)) * align; };
  auto floor_by = [&](float x) { return static_cast<int32_t>(std::floor(x / f)) * align; };
  int32_t h_bar = std::max(align, round_by(static_cast<float>(height)));
  int32_t w_bar = std::max(align, round_by(static_cast<float>(width)));
  if (static_cast<int64_t>(h_bar) * w_bar > max_pixels) {
    const float beta = std::sqrt(static_cast<float>(static_cast<int64_t>(height) * width) / static_cast<float>(max_pixels));
    h_bar = std::max(align, floor_by(static_cast<float>(height) / beta));
    w_bar = std::max(align, floor_by(static_cast<float>(width) / beta));
  } else if (static_cast<int64_t>(h_bar) * w_bar < min_pixels) {
    const float beta = std::sqrt(static_cast<float>(min_pixels) / static_cast<float>(static_cast<int64_t>(height) * width));
    h_bar = ceil_by(static_cast<float>(height) * beta);
    w_bar = ceil_by(static_cast<float>(width) * beta);
  }
  return {w_bar, h_bar};
}

Result<Qwen2VlSize> qwen2vl_fitted_size(const char* who, int32_t width, int32_t height, int64_t align,
                                        int64_t min_pixels, int64_t max_pixels) {
  const std::string name(who);
  if (width <= 0 || height <= 0) return invalid_argument(name + ": empty or malformed image");
  const Qwen2VlSize size = qwen2vl_target_size(width, height, static_cast<int32_t>(align), min_pixels, max_pixels);
  if (size.width <= 0 || size.height <= 0 || size.width % align != 0 || size.height % align != 0 ||
      static_cast<int64_t>(size.width) * size.height > max_pixels) {
    return invalid_argument(name + ": cannot fit a " + std::to_string(width) + "x" + std::to_string(height) +
                            " image into the token limits");
  }
  return size;
}

Status qwen2vl_check_frames(const char* who, const ImageTensor& frame0, const ImageTensor& frame1, int64_t align) {
  if (frame0.width != frame1.width || frame0.height != frame1.height || frame0.width % align != 0 ||
      frame0.height % align != 0 || frame0.width <= 0 || frame0.height <= 0 ||
      frame0.data.size() != static_cast<size_t>(3 * frame0.width * frame0.height) ||
      frame1.data.size() != frame0.data.size()) {
    return invalid_argument(std::string(who) + ": frames must be 3 x H x W with H, W multiples of " +
                            std::to_string(align));
  }
  return Status::ok();
}

VitRope qwen2vl_rope_2d(const VitHparams& hp, const std::vector<int64_t>& pos_y, const std::vector<int64_t>& pos_x,
                        ThreadPool& pool) {
  const int64_t d = hp.n_embd;
  const int n_heads = static_cast<int>(hp.n_heads), hd = static_cast<int>(hp.head_dim);
  return [d, n_heads, hd, &pos_y, &pos_x, &pool](float* qk, int64_t n_tokens) {
    const int sections[4] = {hd / 4, hd / 4, hd / 4, hd / 4};
    pool.parallel_for(n_tokens, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t p[4] = {pos_y[i], pos_x[i], pos_y[i], pos_x[i]};
        rope_vision(qk + i * d, n_heads, hd, p, sections, 10000.0f);
      }
    }, /*min_per_thread=*/16);
  };
}

void qwen2vl_merge_block_order(const float* rows, int64_t ph, int64_t pw, int64_t merge, int64_t d, float* x,
                               int64_t* pos_y, int64_t* pos_x) {
  const int64_t m = merge;
  int64_t t = 0;
  for (int64_t by = 0; by < ph / m; ++by) {
    for (int64_t bx = 0; bx < pw / m; ++bx) {
      for (int64_t dy = 0; dy < m; ++dy) {
        for (int64_t dx = 0; dx < m; ++dx, ++t) {
          const int64_t py = by * m + dy, px = bx * m + dx;
          std::copy_n(&rows[(py * pw + px) * d], d, &x[t * d]);
          pos_y[t] = py;
          pos_x[t] = px;
        }
      }
    }
  }
}

Qwen2VlWindows qwen2vl_windows(int64_t grid_h, int64_t grid_w, int64_t window) {
  Qwen2VlWindows w;
  w.order.reserve(static_cast<size_t>(grid_h * grid_w));
  for (int64_t y = 0; y < grid_h; y += window) {
    for (int64_t x = 0; x < grid_w; x += window) {
      const int64_t h = std::min(window, grid_h - y), wd = std::min(window, grid_w - x);
      for (int64_t dy = 0; dy < h; ++dy) {
        for (int64_t dx = 0; dx < wd; ++dx) w.order.push_back((y + dy) * grid_w + x + dx);
      }
      w.lengths.push_back(h * wd);
    }
  }
  return w;
}

namespace {

// mmproj keys that change llama.cpp's computation for these projectors and that this
// encoder does not implement (docs/refused_keys_qwen2vl.md): refused by name, never ignored.
Status refuse_unimplemented_keys(const GgufFile& g, const VitHparams& hp) {
  Result<int64_t> kv_heads = g.get_i64("clip.vision.attention.head_count_kv");
  if (kv_heads.is_ok() && *kv_heads != hp.n_heads) {
    return unsupported("mmproj: clip.vision.attention.head_count_kv = " + std::to_string(*kv_heads) +
                       " (grouped-query attention in the ViT) is not supported");
  }
  Result<int64_t> head_dim = g.get_i64("clip.vision.attention.head_dim");
  if (head_dim.is_ok() && *head_dim != hp.head_dim) {
    return unsupported("mmproj: clip.vision.attention.head_dim = " + std::to_string(*head_dim) +
                       " differs from embedding_length / head_count = " + std::to_string(hp.head_dim));
  }
  if (hp.projector_type == "qwen2vl_merger") {
    // llama.cpp's qwen2vl graph would switch window attention on for it, yet sets window
    // inputs only for qwen2.5vl_merger; Qwen2-VL itself has no windows.
    Result<int64_t> pattern = g.get_i64("clip.vision.n_wa_pattern");
    if (pattern.is_ok() && *pattern > 0) {
      return unsupported("mmproj: clip.vision.n_wa_pattern on a qwen2vl_merger projector (window attention is "
                         "Qwen2.5-VL's; use projector type qwen2.5vl_merger)");
    }
  }
  return Status::ok();
}

}  // namespace

Result<Qwen2VlProjector> Qwen2VlProjector::load(const GgufFile& g) {
  Qwen2VlProjector p;
  VLKV_ASSIGN_OR_RETURN(p.hp_, read_vit_hparams(g));
  const VitHparams& hp = p.hp_;
  if (hp.projector_type != "qwen2vl_merger" && hp.projector_type != "qwen2.5vl_merger") {
    return invalid_file("mmproj: projector type is neither qwen2vl_merger nor qwen2.5vl_merger");
  }
  VLKV_RETURN_IF_ERROR(refuse_unimplemented_keys(g, hp));
  if (p.is_qwen25()) {
    p.hp_.norm = VitNorm::kRms;
    VLKV_ASSIGN_OR_RETURN(p.window_size_, gguf_i64_or(g, "clip.vision.window_size", p.window_size_));
    if (p.window_size_ < 1 || p.window_size_ > (1 << 16))
      return invalid_file("mmproj: clip.vision.window_size out of range");
    p.full_layer_.assign(static_cast<size_t>(hp.n_layers), false);
    Result<std::vector<int64_t>> idx = g.get_i64_array("clip.vision.wa_layer_indexes");
    Result<int64_t> pattern = g.get_i64("clip.vision.n_wa_pattern");
    if (idx.is_ok()) {
      for (int64_t il : *idx) {
        if (il < 0 || il >= hp.n_layers) return invalid_file("mmproj: clip.vision.wa_layer_indexes holds a bad layer");
        p.full_layer_[static_cast<size_t>(il)] = true;
      }
      p.window_attn_ = true;
      // llama.cpp reads only n_wa_pattern for this projector: with both keys, they must agree.
      if (pattern.is_ok()) {
        for (int64_t il = 0; il < hp.n_layers; ++il) {
          const bool full = *pattern <= 0 || (il + 1) % *pattern == 0;
          if (full != p.full_layer_[static_cast<size_t>(il)]) {
            return unsupported("mmproj: clip.vision.wa_layer_indexes and clip.vision.n_wa_pattern disagree on layer " +
                               std::to_string(il) + " (llama.cpp follows n_wa_pattern)");
          }
        }
      }
    } else if (idx.status().code() != StatusCode::kNotFound) {
      return idx.status();
    } else if (pattern.is_ok()) {
      if (*pattern < 0 || *pattern > hp.n_layers + 1) return invalid_file("mmproj: clip.vision.n_wa_pattern out of range");
      p.window_attn_ = *pattern > 0;
      for (int64_t il = 0; il < hp.n_layers && p.window_attn_; ++il) {
        p.full_layer_[static_cast<size_t>(il)] = (il + 1) % *pattern == 0;
      }
    } else if (pattern.status().code() != StatusCode::kNotFound) {
      return pattern.status();
    } else {
      return invalid_file("mmproj: qwen2.5vl_merger needs clip.vision.n_wa_pattern or clip.vision.wa_layer_indexes");
    }
  }
  if (hp.head_dim % 4 != 0) return invalid_file("mmproj: Qwen2-VL head dimension must be a multiple of 4");
  VLKV_ASSIGN_OR_RETURN(p.merge_, gguf_i64_or(g, "clip.vision.spatial_merge_size", p.merge_));
  if (p.merge_ < 1 || p.merge_ > 8) return invalid_file("mmproj: spatial_merge_size out of range");
  if (g.find_tensor("v.patch_embd.bias")) return unsupported("mmproj: Qwen2-VL patch embedding with a bias");
  VLKV_ASSIGN_OR_RETURN(p.patch_kernel0_, bind_vit_patch_kernel(g, "v.patch_embd.weight", hp.patch_size, hp.n_embd));
  VLKV_ASSIGN_OR_RETURN(p.patch_kernel1_, bind_vit_patch_kernel(g, "v.patch_embd.weight.1", hp.patch_size, hp.n_embd));
  VLKV_ASSIGN_OR_RETURN(p.layers_, bind_vit_layers(g, hp));
  if (g.find_tensor("v.pre_ln.weight")) return unsupported("mmproj: Qwen2-VL with a pre-LayerNorm is not supported");
  VLKV_RETURN_IF_ERROR(bind_vit_norm_optional(g, "v.post_ln", hp.n_embd, p.post_ln_w_, p.post_ln_b_));
  if (p.window_attn_ && p.window_size_ % p.align() != 0) {
    return invalid_file("mmproj: clip.vision.window_size is not a multiple of patch_size * spatial_merge_size");
  }
  const int64_t merged = hp.n_embd * p.merge_ * p.merge_;
  VLKV_RETURN_IF_ERROR(bind_vit_mlp(g, "mm.0.weight", "mm.0.bias", "mm.2.weight", "mm.2.bias", merged, 0, p.mm0_,
                                    p.mm0_b_, p.mm2_, p.mm2_b_));
  return p;
}

Qwen2VlSize Qwen2VlProjector::target_size(const Image& image) const {
  return qwen2vl_target_size(image.width, image.height, static_cast<int32_t>(align()), min_pixels(), max_pixels());
}

Result<Qwen2VlSize> Qwen2VlProjector::fitted_size(int32_t width, int32_t height) const {
  return qwen2vl_fitted_size(kName, width, height, align(), min_pixels(), max_pixels());
}

Result<ImageTensor> Qwen2VlProjector::preprocess(const Image& image) const {
  if (!image.valid()) return invalid_argument("qwen2vl: empty or malformed image");
  return preprocess(image, target_size(image));
}

Result<ImageTensor> Qwen2VlProjector::preprocess(const Image& image, Qwen2VlSize size) const {
  if (!image.valid()) return invalid_argument("qwen2vl: empty or malformed image");
  if (size.width <= 0 || size.height <= 0 || size.width % align() != 0 || size.height % align() != 0 ||
      static_cast<int64_t>(size.width) * size.height > max_pixels()) {
    return invalid_argument("qwen2vl: cannot fit a " + std::to_string(image.width) + "x" +
                            std::to_string(image.height) + " image into the token limits");
  }
  // libmtmd (dyn_size preprocessor, PAD_CEIL): bilinear resize keeping the aspect ratio,
  // centred on black, not HF smart_resize's stretch (README-batch2 item 5).
  return normalize_image(resize_image_padded(image, size.width, size.height, ResizeAlgo::kBilinear), hp_.image_mean,
                         hp_.image_std);
}

Status Qwen2VlProjector::encode(const ImageTensor& frame0, const ImageTensor& frame1, std::vector<float>& embd,
                                ThreadPool& pool) const {
  VLKV_RETURN_IF_ERROR(qwen2vl_check_frames(kName, frame0, frame1, align()));
  const int64_t d = hp_.n_embd, ps = hp_.patch_size, m = merge_;
  const int64_t pw = frame0.width / ps, ph = frame0.height / ps, n = pw * ph;

  // Patch embedding: the two temporal kernels, summed; patches row-major (py, px).
  std::vector<float> e0(n * d), e1(n * d);  // [n, n_embd]
  vit_patch_embed(frame0, ps, patch_kernel0_, e0.data(), pool);
  vit_patch_embed(frame1, ps, patch_kernel1_, e1.data(), pool);
  add_inplace(e0.data(), e1.data(), n * d);

  // Reorder into merge-block order (by, bx, dy, dx) so each merged token's m*m patches
  // are consecutive; pos holds each token's (y, x) patch coordinates.
  std::vector<float> x(n * d);           // [n, n_embd] residual stream, block order
  std::vector<int64_t> pos_y(n), pos_x(n);
  qwen2vl_merge_block_order(e0.data(), ph, pw, m, d, x.data(), pos_y.data(), pos_x.data());

  // Qwen2.5-VL window attention: merged tokens (m*m patches each) reordered window by
  // window; layers that are not full attend within their window only.
  Qwen2VlWindows win;
  std::vector<int64_t> windows;  // window lengths in patches
  const int64_t mm = m * m;
  if (window_attn_) {
    win = qwen2vl_windows(ph / m, pw / m, window_merged());
    std::vector<float> xw(x.size());
    std::vector<int64_t> yw(n), xw_pos(n);
    for (int64_t i = 0; i < n / mm; ++i) {
      const int64_t src = win.order[i];
      std::copy_n(&x[src * mm * d], mm * d, &xw[i * mm * d]);
      std::copy_n(&pos_y[src * mm], mm, &yw[i * mm]);
      std::copy_n(&pos_x[src * mm], mm, &xw_pos[i * mm]);
    }
    x.swap(xw);
    pos_y.swap(yw);
    pos_x.swap(xw_pos);
    for (int64_t len : win.lengths) windows.push_back(len * mm);
  }

  const VitRope rope = qwen2vl_rope_2d(hp_, pos_y, pos_x, pool);
  VitScratch scratch;  // one set of block buffers for every layer
  for (size_t il = 0; il < layers_.size(); ++il) {
    vit_block(hp_, layers_[il], x.data(), n, rope, pool, layer_is_full(static_cast<int64_t>(il)) ? nullptr : &windows,
              &scratch);
  }
  if (!post_ln_w_.empty()) vit_norm_rows(hp_, x.data(), post_ln_w_, post_ln_b_, n, x.data());

  // Merger: m*m consecutive tokens as one row [n / m^2, m^2 * n_embd] -> Linear, GELU, Linear.
  const int64_t n_out = n / (m * m);
  std::vector<float> hidden(n_out * mm0_.n_rows);  // [n_out, hidden]
  matmul(mm0_, x.data(), n_out, hidden.data(), pool);
  add_bias_rows(hidden.data(), mm0_b_, n_out, mm0_.n_rows);
  gelu(hidden.data(), n_out * mm0_.n_rows, hidden.data());
  embd.resize(static_cast<size_t>(n_out * mm2_.n_rows));
  matmul(mm2_, hidden.data(), n_out, embd.data(), pool);
  add_bias_rows(embd.data(), mm2_b_, n_out, mm2_.n_rows);
  if (window_attn_) {  // back to row-major merged order
    const int64_t e = mm2_.n_rows;
    std::vector<float> rm(embd.size());
    for (int64_t i = 0; i < n_out; ++i) std::copy_n(&embd[i * e], e, &rm[win.order[i] * e]);
    embd.swap(rm);
  }
  return Status::ok();
}

}  // namespace vlkv
