#include "vision/qwen3vl_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/ops.h"
#include "vision/vit_common_image.h"

namespace vlkv {

std::vector<float> resize_grid_bilinear_align_corners(const std::vector<float>& grid, int64_t side_h, int64_t side_w,
                                                      int64_t dim, int64_t out_h, int64_t out_w) {
  // ggml_compute_forward_upscale_f32 (bilinear, align corners): scale factors in float,
  // source coordinate = dst index / scale, neighbours clamped, weights clamped to [0, 1].
  const float sf_x = out_w > 1 && side_w > 1 ? static_cast<float>(out_w - 1) / static_cast<float>(side_w - 1)
                                             : static_cast<float>(out_w) / static_cast<float>(side_w);
  const float sf_y = out_h > 1 && side_h > 1 ? static_cast<float>(out_h - 1) / static_cast<float>(side_h - 1)
                                             : static_cast<float>(out_h) / static_cast<float>(side_h);
  std::vector<float> out(static_cast<size_t>(out_h * out_w * dim));  // [out_h, out_w, dim]
  for (int64_t oy = 0; oy < out_h; ++oy) {
    const float y = static_cast<float>(oy) / sf_y;
    const int64_t y0 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(y)), 0, side_h - 1);
    const int64_t y1 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(y)) + 1, 0, side_h - 1);
    const float dy = std::clamp(y - static_cast<float>(y0), 0.0f, 1.0f);
    for (int64_t ox = 0; ox < out_w; ++ox) {
      const float x = static_cast<float>(ox) / sf_x;
      const int64_t x0 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(x)), 0, side_w - 1);
      const int64_t x1 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(x)) + 1, 0, side_w - 1);
      const float dx = std::clamp(x - static_cast<float>(x0), 0.0f, 1.0f);
      const float* a = &grid[static_cast<size_t>((y0 * side_w + x0) * dim)];
      const float* b = &grid[static_cast<size_t>((y0 * side_w + x1) * dim)];
      const float* c = &grid[static_cast<size_t>((y1 * side_w + x0) * dim)];
      const float* d = &grid[static_cast<size_t>((y1 * side_w + x1) * dim)];
      float* o = &out[static_cast<size_t>((oy * out_w + ox) * dim)];
      for (int64_t i = 0; i < dim; ++i) {
        o[i] = a[i] * (1 - dx) * (1 - dy) + b[i] * dx * (1 - dy) + c[i] * (1 - dx) * dy + d[i] * dx * dy;
      }
    }
  }
  return out;
}

namespace {

// One ViT block with the fused QKV matrix split into q, k and v row views (rows [0, d),
// [d, 2d), [2d, 3d) of attn_qkv, as llama.cpp's views of its output).
Result<VitLayer> bind_layer(const GgufFile& g, const VitHparams& hp, int64_t il) {
  const int64_t d = hp.n_embd;
  const std::string p = "v.blk." + std::to_string(il) + ".";
  VitLayer l;
  if (!g.find_tensor(p + "attn_qkv.weight")) {
    return unsupported("mmproj: qwen3vl_merger needs the fused '" + p + "attn_qkv.weight' (llama.cpp's graph reads "
                       "only that)");
  }
  VLKV_ASSIGN_OR_RETURN(WeightMatrix qkv, bind_vit_matrix(g, p + "attn_qkv.weight", d, 3 * d));
  VLKV_ASSIGN_OR_RETURN(std::vector<float> qkv_b, bind_vit_vector(g, p + "attn_qkv.bias", 3 * d));
  WeightMatrix* parts[3] = {&l.wq, &l.wk, &l.wv};
  std::vector<float>* biases[3] = {&l.bq, &l.bk, &l.bv};
  for (int i = 0; i < 3; ++i) {
    *parts[i] = qkv;
    parts[i]->data = qkv.data + static_cast<size_t>(i * d) * qkv.row_bytes;
    parts[i]->n_rows = d;
    biases[i]->assign(qkv_b.begin() + i * d, qkv_b.begin() + (i + 1) * d);
  }
  VLKV_ASSIGN_OR_RETURN(l.ln1_w, bind_vit_vector(g, p + "ln1.weight", d));
  VLKV_ASSIGN_OR_RETURN(l.ln1_b, bind_vit_vector_optional(g, p + "ln1.bias", d));
  VLKV_RETURN_IF_ERROR(bind_vit_block_after_qkv(g, hp, p, l));
  return l;
}


}  // namespace

Result<Qwen3VlProjector> Qwen3VlProjector::load(const GgufFile& g) {
  Qwen3VlProjector p;
  VLKV_ASSIGN_OR_RETURN(p.hp_, read_vit_hparams(g));
  const VitHparams& hp = p.hp_;
  if (hp.projector_type != "qwen3vl_merger") return invalid_file("mmproj: projector type is not qwen3vl_merger");
  if (hp.head_dim % 4 != 0) return invalid_file("mmproj: Qwen3-VL head dimension must be a multiple of 4");
  Result<int64_t> merge = g.get_i64("clip.vision.spatial_merge_size");
  if (merge.is_ok() && *merge != kMerge) {
    return unsupported("mmproj: clip.vision.spatial_merge_size = " + std::to_string(*merge) +
                       ": llama.cpp's qwen3vl graph merges 2x2 patches only");
  } else if (!merge.is_ok() && merge.status().code() != StatusCode::kNotFound) {
    return merge.status();
  }
  if (g.find_tensor("v.class_embd")) return unsupported("mmproj: qwen3vl_merger with a class embedding (v.class_embd)");

  VLKV_ASSIGN_OR_RETURN(p.patch_kernel0_, bind_vit_patch_kernel(g, "v.patch_embd.weight", hp.patch_size, hp.n_embd));
  VLKV_ASSIGN_OR_RETURN(p.patch_kernel1_, bind_vit_patch_kernel(g, "v.patch_embd.weight.1", hp.patch_size, hp.n_embd));
  VLKV_ASSIGN_OR_RETURN(p.patch_bias_, bind_vit_vector(g, "v.patch_embd.bias", hp.n_embd));

  const GgufTensorInfo* pos = g.find_tensor("v.position_embd.weight");
  if (!pos || pos->dims.size() != 2 || pos->dims[0] != hp.n_embd) {
    return invalid_file("mmproj: qwen3vl_merger needs v.position_embd.weight with dims {n_embd, side * side}");
  }
  p.pos_side_ = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(pos->dims[1]))));
  if (p.pos_side_ < 1 || p.pos_side_ * p.pos_side_ != pos->dims[1]) {
    return invalid_file("mmproj: v.position_embd.weight does not hold a square grid of positions");
  }
  VLKV_ASSIGN_OR_RETURN(WeightMatrix pos_m, bind_vit_matrix(g, "v.position_embd.weight", hp.n_embd, pos->dims[1]));
  p.pos_embd_.resize(static_cast<size_t>(pos->dims[1] * hp.n_embd));
  for (int64_t r = 0; r < pos->dims[1]; ++r) get_row(pos_m, r, &p.pos_embd_[static_cast<size_t>(r * hp.n_embd)]);

  p.layers_.reserve(static_cast<size_t>(hp.n_layers));
  for (int64_t il = 0; il < hp.n_layers; ++il) {
    VLKV_ASSIGN_OR_RETURN(VitLayer l, bind_layer(g, hp, il));
    p.layers_.push_back(std::move(l));
  }
  VLKV_RETURN_IF_ERROR(bind_vit_norm_optional(g, "v.pre_ln", hp.n_embd, p.pre_ln_w_, p.pre_ln_b_));
  VLKV_RETURN_IF_ERROR(bind_vit_norm_optional(g, "v.post_ln", hp.n_embd, p.post_ln_w_, p.post_ln_b_));
  const int64_t merged = hp.n_embd * kMerge * kMerge;
  VLKV_RETURN_IF_ERROR(bind_vit_mlp(g, "mm.0.weight", "mm.0.bias", "mm.2.weight", "mm.2.bias", merged, 0, p.mm0_, p.mm0_b_,
                                p.mm2_, p.mm2_b_));
  // Deepstack mergers: llama.cpp looks for v.deepstack.N.* for every ViT layer N.
  for (int64_t il = 0; il < hp.n_layers; ++il) {
    const std::string b = "v.deepstack." + std::to_string(il) + ".";
    const bool any = g.find_tensor(b + "fc1.weight") || g.find_tensor(b + "fc2.weight") ||
                     g.find_tensor(b + "norm.weight");
    if (!any) continue;
    Deepstack ds;
    ds.layer = il;
    VLKV_ASSIGN_OR_RETURN(ds.norm_w, bind_vit_vector(g, b + "norm.weight", merged));
    VLKV_ASSIGN_OR_RETURN(ds.norm_b, bind_vit_vector_optional(g, b + "norm.bias", merged));
    VLKV_RETURN_IF_ERROR(bind_vit_mlp(g, b + "fc1.weight", b + "fc1.bias", b + "fc2.weight", b + "fc2.bias", merged,
                                  p.mm2_.n_rows, ds.fc1, ds.fc1_b, ds.fc2, ds.fc2_b));
    p.deepstack_.push_back(std::move(ds));
  }
  return p;
}

Result<Qwen2VlSize> Qwen3VlProjector::fitted_size(int32_t width, int32_t height) const {
  // qwen2vl_target_size gives multiples of align(): its alignment check refuses nothing here.
  return qwen2vl_fitted_size(kName, width, height, align(), min_pixels(), max_pixels());
}

Result<ImageTensor> Qwen3VlProjector::preprocess(const Image& image) const {
  if (!image.valid()) return invalid_argument("qwen3vl: empty or malformed image");
  VLKV_ASSIGN_OR_RETURN(const Qwen2VlSize size, fitted_size(image.width, image.height));
  return normalize_image(resize_image_padded(image, size.width, size.height, ResizeAlgo::kBilinear), hp_.image_mean,
                         hp_.image_std);
}

void Qwen3VlProjector::merge_mlp(const float* x, int64_t n_rows, const std::vector<float>* norm_w,
                                 const std::vector<float>* norm_b, const WeightMatrix& fc1,
                                 const std::vector<float>& b1, const WeightMatrix& fc2, const std::vector<float>& b2,
                                 float* out, ThreadPool& pool) const {
  const int64_t width = fc1.n_cols;  // 4 * n_embd
  std::vector<float> normed;         // [n_rows, width]
  if (norm_w) {
    normed.resize(static_cast<size_t>(n_rows * width));
    vit_layer_norm_rows(x, *norm_w, *norm_b, n_rows, width, hp_.eps, normed.data());
    x = normed.data();
  }
  std::vector<float> hidden(static_cast<size_t>(n_rows * fc1.n_rows));  // [n_rows, hidden]
  matmul(fc1, x, n_rows, hidden.data(), pool);
  add_bias_rows(hidden.data(), b1, n_rows, fc1.n_rows);
  gelu(hidden.data(), n_rows * fc1.n_rows, hidden.data());
  matmul(fc2, hidden.data(), n_rows, out, pool);
  add_bias_rows(out, b2, n_rows, fc2.n_rows);
}

Status Qwen3VlProjector::encode(const ImageTensor& frame0, const ImageTensor& frame1, std::vector<float>& embd,
                                ThreadPool& pool) const {
  VLKV_RETURN_IF_ERROR(qwen2vl_check_frames(kName, frame0, frame1, align()));
  const int64_t d = hp_.n_embd, ps = hp_.patch_size, m = kMerge, mm = m * m;
  const int64_t pw = frame0.width / ps, ph = frame0.height / ps, n = pw * ph;

  // Patch embedding: the two temporal kernels summed, plus the conv bias; patches row-major.
  std::vector<float> e0(n * d), e1(n * d);  // [n, n_embd]
  vit_patch_embed(frame0, ps, patch_kernel0_, e0.data(), pool);
  vit_patch_embed(frame1, ps, patch_kernel1_, e1.data(), pool);
  add_inplace(e0.data(), e1.data(), n * d);
  add_bias_rows(e0.data(), patch_bias_, n, d);
  // Learned positions on the patch grid (as is when the grid is the trained one).
  const std::vector<float> pos = ph == pos_side_ && pw == pos_side_
                                     ? pos_embd_
                                     : resize_grid_bilinear_align_corners(pos_embd_, pos_side_, pos_side_, d, ph, pw);
  add_inplace(e0.data(), pos.data(), n * d);

  // Merge-block order (by, bx, dy, dx): each merged token's 2x2 patches consecutive.
  std::vector<float> x(n * d);  // [n, n_embd] residual stream, block order
  std::vector<int64_t> pos_y(n), pos_x(n);
  qwen2vl_merge_block_order(e0.data(), ph, pw, m, d, x.data(), pos_y.data(), pos_x.data());
  if (!pre_ln_w_.empty()) vit_norm_rows(hp_, x.data(), pre_ln_w_, pre_ln_b_, n, x.data());

  const VitRope rope = qwen2vl_rope_2d(hp_, pos_y, pos_x, pool);
  const int64_t n_out = n / mm, e = n_embd_main(), width = n_embd_out();
  embd.assign(static_cast<size_t>(n_out * width), 0.0f);
  std::vector<float> part(static_cast<size_t>(n_out * e));  // [n_out, n_embd_main]
  auto place = [&](int64_t slot) {  // part -> column block `slot` of every output row
    for (int64_t r = 0; r < n_out; ++r) std::copy_n(&part[r * e], e, &embd[r * width + slot * e]);
  };
  size_t next_ds = 0;
  VitScratch scratch;  // one set of block buffers for every layer
  for (size_t il = 0; il < layers_.size(); ++il) {
    vit_block(hp_, layers_[il], x.data(), n, rope, pool, nullptr, &scratch);
    if (next_ds < deepstack_.size() && deepstack_[next_ds].layer == static_cast<int64_t>(il)) {
      const Deepstack& ds = deepstack_[next_ds];
      merge_mlp(x.data(), n_out, &ds.norm_w, &ds.norm_b, ds.fc1, ds.fc1_b, ds.fc2, ds.fc2_b, part.data(), pool);
      place(static_cast<int64_t>(++next_ds));
    }
  }
  if (!post_ln_w_.empty()) vit_norm_rows(hp_, x.data(), post_ln_w_, post_ln_b_, n, x.data());
  merge_mlp(x.data(), n_out, nullptr, nullptr, mm0_, mm0_b_, mm2_, mm2_b_, part.data(), pool);
  place(0);
  return Status::ok();
}

}  // namespace vlkv
