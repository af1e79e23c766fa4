#include "vision/idefics3_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gguf/gguf_optional.h"
#include "vision/mmproj_key_audit.h"
#include "vision/vit_common_image.h"

namespace vlkv {

Result<Idefics3Tiles> idefics3_grid(int32_t width, int32_t height, int64_t image_size, int64_t longest_edge) {
  if (width <= 0 || height <= 0) return invalid_argument("idefics3: empty or malformed image");
  if (image_size <= 0 || image_size > (1 << 14)) return invalid_argument("idefics3: bad tile size");
  const int32_t s = static_cast<int32_t>(image_size);
  Idefics3Tiles out;
  if (longest_edge > 0) {
    if (longest_edge > (1 << 15)) return invalid_argument("idefics3: preproc_image_size is too large");
    // img_tool::calc_size_preserved_ratio: scale so the longer side is longest_edge
    // (up or down), then round each side up to a multiple of the tile size.
    const float scale = std::min(static_cast<float>(longest_edge) / static_cast<float>(width),
                                 static_cast<float>(longest_edge) / static_cast<float>(height));
    auto ceil_to_tile = [&](float v) {
      return static_cast<int32_t>(std::ceil(v / static_cast<float>(s))) * s;
    };
    const int32_t refined_w = std::max(s, ceil_to_tile(static_cast<float>(width) * scale));
    const int32_t refined_h = std::max(s, ceil_to_tile(static_cast<float>(height) * scale));
    out.grid_cols = refined_w / s;
    out.grid_rows = refined_h / s;
  }
  return out;
}

Result<Idefics3Tiles> idefics3_preprocess(const Image& image, int64_t image_size, int64_t longest_edge,
                                          const float mean[3], const float std[3]) {
  if (!image.valid()) return invalid_argument("idefics3: empty or malformed image");
  VLKV_ASSIGN_OR_RETURN(Idefics3Tiles out, idefics3_grid(image.width, image.height, image_size, longest_edge));
  const int32_t s = static_cast<int32_t>(image_size);
  if (longest_edge > 0) {
    const int32_t refined_w = out.grid_cols * s, refined_h = out.grid_rows * s;
    const Image refined = resize_image_padded(image, refined_w, refined_h, ResizeAlgo::kBicubic, {0, 0, 0});
    for (int32_t y = 0; y < refined_h; y += s) {
      for (int32_t x = 0; x < refined_w; x += s) {
        out.tensors.push_back(normalize_image(crop_image(refined, x, y, s, s), mean, std));
      }
    }
  }
  out.tensors.push_back(normalize_image(resize_image(image, s, s, ResizeAlgo::kBilinear), mean, std));
  return out;
}

void idefics3_pixel_shuffle(const float* x, int64_t n_embd, int64_t w, int64_t h, int64_t s, std::vector<float>& out) {
  const int64_t bw = (w + s - 1) / s, bh = (h + s - 1) / s;
  const int64_t row = n_embd * s * s;
  out.assign(static_cast<size_t>(bw * bh * row), 0.0f);  // zeros cover the padding
  for (int64_t by = 0; by < bh; ++by) {
    for (int64_t bx = 0; bx < bw; ++bx) {
      float* dst = &out[(by * bw + bx) * row];
      for (int64_t dy = 0; dy < s; ++dy) {
        for (int64_t dx = 0; dx < s; ++dx) {
          const int64_t py = by * s + dy, px = bx * s + dx;
          if (py >= h || px >= w) continue;
          std::memcpy(dst + (dy * s + dx) * n_embd, x + (py * w + px) * n_embd, sizeof(float) * n_embd);
        }
      }
    }
  }
}

std::vector<Idefics3LayoutItem> idefics3_token_layout(int32_t grid_rows, int32_t grid_cols) {
  const std::string fake = "<fake_token_around_image>";
  std::vector<Idefics3LayoutItem> items;
  auto add = [&](std::vector<std::string> tokens, bool tokenized) {
    items.push_back({std::move(tokens), tokenized, -1});
  };
  auto add_tile = [&](int32_t tile) { items.push_back({{}, false, tile}); };
  int32_t tile = 0;
  for (int32_t r = 0; r < grid_rows; ++r) {
    for (int32_t c = 0; c < grid_cols; ++c) {
      add({fake, "<row_" + std::to_string(r + 1) + "_col_" + std::to_string(c + 1) + ">"}, true);
      add_tile(tile++);
    }
    if (r + 1 < grid_rows) add({"\n"}, false);
  }
  add({"\n\n", fake, "<global-img>"}, false);
  add_tile(tile);
  add({fake}, false);
  return items;
}

Result<Idefics3Projector> Idefics3Projector::load(const GgufFile& g) {
  Idefics3Projector p;
  VLKV_ASSIGN_OR_RETURN(VitHparams hp, read_vit_hparams(g));
  if (hp.projector_type != "idefics3") return invalid_file("mmproj: projector type is not idefics3");
  // llama.cpp runs idefics3 through its generic build_vit: refuse what that would apply and
  // the SigLIP encoder here does not.
  VLKV_RETURN_IF_ERROR(refuse_unimplemented_vit_keys(g, hp));
  VLKV_RETURN_IF_ERROR(refuse_swapped_vit_ffn(g, hp));
  VLKV_RETURN_IF_ERROR(refuse_unimplemented_vit_tensors(g, hp));
  if (g.find_tensor("v.pre_ln.weight")) {
    return unsupported("mmproj: tensor 'v.pre_ln.weight' (a pre-LayerNorm, applied by llama.cpp's ViT) is not "
                       "supported for idefics3");
  }
  VLKV_ASSIGN_OR_RETURN(p.scale_, gguf_i64_or(g, "clip.vision.projector.scale_factor", p.scale_));
  if (p.scale_ < 1 || p.scale_ > 16) return invalid_file("mmproj: projector.scale_factor out of range");
  VLKV_ASSIGN_OR_RETURN(p.longest_edge_, gguf_i64_or(g, "clip.vision.preproc_image_size", p.longest_edge_));
  if (p.longest_edge_ < 0 || p.longest_edge_ > (1 << 15))
    return invalid_file("mmproj: preproc_image_size out of range");
  VLKV_ASSIGN_OR_RETURN(p.encoder_, SiglipEncoder::load(g, hp));
  const GgufTensorInfo* fc = g.find_tensor("mm.model.fc.weight");
  if (!fc || fc->dims.size() != 2) return invalid_file("mmproj: missing or malformed 'mm.model.fc.weight'");
  VLKV_ASSIGN_OR_RETURN(p.proj_, bind_vit_matrix(g, "mm.model.fc.weight", hp.n_embd * p.scale_ * p.scale_,
                                                 fc->dims[1]));
  return p;
}

int64_t Idefics3Projector::tokens_per_tile() const {
  const int64_t side = (encoder_.n_patches_side() + scale_ - 1) / scale_;
  return side * side;
}

Status Idefics3Projector::encode_tile(const ImageTensor& tile, std::vector<float>* shuffled, std::vector<float>& embd,
                                      ThreadPool& pool) const {
  std::vector<float> feats;  // [n_patches, n_embd]
  VLKV_RETURN_IF_ERROR(encoder_.encode(tile, feats, pool));
  const int64_t side = encoder_.n_patches_side();
  std::vector<float> shuf;  // [tokens_per_tile, n_embd * s * s]
  idefics3_pixel_shuffle(feats.data(), hparams().n_embd, side, side, scale_, shuf);
  const int64_t n = tokens_per_tile();
  embd.resize(static_cast<size_t>(n * proj_.n_rows));
  matmul(proj_, shuf.data(), n, embd.data(), pool);
  if (shuffled) *shuffled = std::move(shuf);
  return Status::ok();
}

}  // namespace vlkv
