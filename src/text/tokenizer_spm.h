// SentencePiece-style tokenization ("llama" vocabularies) as llama.cpp's
// llm_tokenizer_spm: greedy bigram merging by piece score, byte fallback.
#pragma once

#include <string_view>
#include <vector>

#include "text/tokenizer_vocab.h"

namespace vlkv {

// Appends the tokens of one raw-text fragment. `text` already has spaces escaped to
// U+2581 and the optional leading space added (see Tokenizer::encode). Bytes that form
// no piece become <0xNN> byte tokens, or unk when the vocabulary has none.
void spm_tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>* out);

// Replaces every ' ' with U+2581 ("▁"), as SentencePiece's whitespace escaping.
std::string spm_escape_whitespace(std::string_view text);

}  // namespace vlkv
