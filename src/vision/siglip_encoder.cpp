#include "vision/siglip_encoder.h"

#include <string>

#include "kernels/ops.h"

namespace vlkv {

Result<SiglipEncoder> SiglipEncoder::load(const GgufFile& g, const VitHparams& hp) {
  SiglipEncoder e;
  e.hp_ = hp;
  const int64_t d = hp.n_embd;
  VLKV_ASSIGN_OR_RETURN(e.patch_kernel_, bind_vit_patch_kernel(g, "v.patch_embd.weight", hp.patch_size, d));
  VLKV_ASSIGN_OR_RETURN(e.patch_bias_, bind_vit_vector(g, "v.patch_embd.bias", d));
  VLKV_ASSIGN_OR_RETURN(e.pos_embd_, bind_vit_matrix(g, "v.position_embd.weight", d, e.n_patches()));
  VLKV_ASSIGN_OR_RETURN(e.layers_, bind_vit_layers(g, hp));
  VLKV_ASSIGN_OR_RETURN(e.post_ln_w_, bind_vit_vector(g, "v.post_ln.weight", d));
  VLKV_ASSIGN_OR_RETURN(e.post_ln_b_, bind_vit_vector(g, "v.post_ln.bias", d));
  if (g.find_tensor("v.pre_ln.weight")) return unsupported("mmproj: SigLIP with a pre-LayerNorm is not supported");
  return e;
}

Status SiglipEncoder::encode(const ImageTensor& img, std::vector<float>& out, ThreadPool& pool) const {
  if (img.width != hp_.image_size || img.height != hp_.image_size ||
      img.data.size() != static_cast<size_t>(3 * img.width * img.height)) {
    return invalid_argument("SigLIP input must be 3 x " + std::to_string(hp_.image_size) + " x " +
                            std::to_string(hp_.image_size));
  }
  const int64_t n = n_patches(), d = hp_.n_embd;
  std::vector<float> x(n * d);  // [n_patches, n_embd] residual stream
  vit_patch_embed(img, hp_.patch_size, patch_kernel_, x.data(), pool);
  add_bias_rows(x.data(), patch_bias_, n, d);
  std::vector<float> pos(d);  // [n_embd] one learned position
  for (int64_t p = 0; p < n; ++p) {
    get_row(pos_embd_, p, pos.data());
    add_inplace(&x[p * d], pos.data(), d);
  }
  VitScratch scratch;  // one set of block buffers for every layer
  for (const VitLayer& l : layers_) vit_block(hp_, l, x.data(), n, VitRope(), pool, nullptr, &scratch);
  out.resize(static_cast<size_t>(n * d));
  for (int64_t p = 0; p < n; ++p) layer_norm(&x[p * d], post_ln_w_.data(), post_ln_b_.data(), d, hp_.eps, &out[p * d]);
  return Status::ok();
}

}  // namespace vlkv
