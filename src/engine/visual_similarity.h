// The visual-to-text similarity of salient-token methods (arXiv 2503.16257, METHODS.md
// "Salient visual tokens"): per visual token of a prompt, the mean dot product of its embedding (the
// projector output fed to the decoder) with the embeddings (token_embd rows) of the
// prompt's text tokens. The engine passes it to KvCache::attend only for methods that
// read it (KvCache::uses_visual_similarity).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/matmul.h"
#include "vlkv/engine.h"

namespace vlkv {

// The mean token_embd row of the prompt's text tokens (is_text); empty when it has none.
std::vector<double> mean_text_embedding(const PreparedPrompt& prompt, const WeightMatrix& token_embd,
                                        const std::function<bool(int32_t)>& is_text);

// Per row of [n_tokens, stride] media embeddings: its first mean_text.size() values dotted
// with mean_text (a row may carry more: Qwen3-VL's deepstack parts). Empty when mean_text is.
std::vector<float> visual_similarity_of(const float* rows, int64_t n_tokens, int64_t stride,
                                        const std::vector<double>& mean_text);

// One vector per prompt chunk: [n_tokens] for a media chunk, empty for a text chunk.
// All empty when the prompt has no media or no text token. is_text says which token
// ids count as text (the engine: all but control tokens such as BOS, as TokenKind does).
// mean_t <v, e_t> = <v, mean_t e_t>: one mean embedding, then one dot per visual token.
std::vector<std::vector<float>> visual_text_similarity(const PreparedPrompt& prompt, const WeightMatrix& token_embd,
                                                       const std::function<bool(int32_t)>& is_text);

}  // namespace vlkv
