#include "vision/mmproj_key_audit.h"

#include <array>
#include <string>

namespace vlkv {
namespace {

// An optional integer key that must equal `expected` when present.
Status refuse_unless_equal(const GgufFile& g, const char* key, int64_t expected, const char* why) {
  if (!g.find(key)) return Status::ok();
  Result<int64_t> v = g.get_i64(key);
  if (!v.is_ok()) return invalid_file(std::string("mmproj: '") + key + "': " + v.status().message());
  if (*v == expected) return Status::ok();
  return unsupported(std::string("mmproj: '") + key + "' = " + std::to_string(*v) + " (" + why + ", " +
                     std::to_string(expected) + " here) is not supported");
}

}  // namespace

Status refuse_unimplemented_vit_keys(const GgufFile& g, const VitHparams& hp) {
  VLKV_RETURN_IF_ERROR(refuse_unless_equal(g, "clip.vision.attention.head_count_kv", hp.n_heads,
                                           "grouped-query ViT attention; only head_count"));
  return refuse_unless_equal(g, "clip.vision.attention.head_dim", hp.head_dim,
                             "a head size other than embedding_length / head_count");
}

Status refuse_swapped_vit_ffn(const GgufFile& g, const VitHparams& hp) {
  if (hp.n_ff == hp.n_embd) {
    return unsupported("mmproj: 'clip.vision.feed_forward_length' = embedding_length = " + std::to_string(hp.n_embd) +
                       ": llama.cpp then swaps ffn_up and ffn_down (its fix for legacy tensor names), which "
                       "vlkv does not reproduce");
  }
  const GgufTensorInfo* down = g.find_tensor("v.blk.0.ffn_down.weight");
  if (down && !down->dims.empty() && down->dims[0] == hp.n_embd) {
    return unsupported("mmproj: 'v.blk.0.ffn_down.weight' has the legacy swapped ffn_up/ffn_down names "
                       "(llama.cpp swaps them back); such files are not supported, convert the model again");
  }
  return Status::ok();
}

Status refuse_unimplemented_vit_tensors(const GgufFile& g, const VitHparams& hp) {
  static constexpr std::array<const char*, 12> kSuffixes = {
      "ls1.weight",       "ls2.weight",         "out_scale.weight",   "attn_post_norm.weight",
      "ffn_post_norm.weight", "attn_q_norm.weight", "attn_k_norm.weight", "attn_qkv.weight",
      "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight", "ffn_gate_inp.weight"};
  for (int64_t il = 0; il < hp.n_layers; ++il) {
    const std::string prefix = "v.blk." + std::to_string(il) + ".";
    for (const char* s : kSuffixes) {
      if (g.find_tensor(prefix + s)) {
        return unsupported("mmproj: tensor '" + prefix + s + "' (applied by llama.cpp's ViT for projector '" +
                           hp.projector_type + "') is not supported");
      }
    }
  }
  return Status::ok();
}

}  // namespace vlkv
