// mmproj keys and tensors that change what llama.cpp computes but that a vlkv ViT does not
// implement: each found is refused naming it, never ignored (docs/refused_keys_llava_idefics3.md).
// A projector's loader calls the checks that match the llama.cpp graph it follows.
#pragma once

#include "gguf/gguf_reader.h"
#include "vision/vit_common.h"
#include "vlkv/status.h"

namespace vlkv {

// Keys every clip_graph reads for the ViT: clip.vision.attention.head_count_kv other than
// head_count (grouped-query ViT attention), clip.vision.attention.head_dim other than
// embedding_length / head_count. Unsupported, naming the key.
Status refuse_unimplemented_vit_keys(const GgufFile& gguf, const VitHparams& hp);

// llama.cpp swaps v.blk.N.ffn_up and ffn_down for the older projector types (mlp, ldp,
// idefics3, qwen2vl, gemma3, minicpmv, ...) whenever ffn_down's first dimension equals the
// ViT width: files converted with the legacy swapped names, and also every file whose
// clip.vision.feed_forward_length equals embedding_length. vlkv binds the names as written,
// so both cases are refused (a swapped file would otherwise fail on shapes or, with a square
// FFN, run the two matrices the other way round).
Status refuse_swapped_vit_ffn(const GgufFile& gguf, const VitHparams& hp);

// Per-layer tensors that llama.cpp's generic build_vit applies when present: layer scales
// (ls1, ls2, out_scale), post-attention / post-FFN norms, q/k norms, a fused qkv and a
// mixture-of-experts FFN. For projectors whose llama.cpp graph is
// build_vit (idefics3, ...); the llava graph ignores them, so the mlp loader does not call it.
Status refuse_unimplemented_vit_tensors(const GgufFile& gguf, const VitHparams& hp);

}  // namespace vlkv
