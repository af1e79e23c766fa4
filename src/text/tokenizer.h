// Text <-> token ids from the vocabulary in GGUF metadata (tokenizer.ggml.*):
// SentencePiece-style ("llama") and byte-level BPE ("gpt2", with the
// pre-tokenizer regex named by tokenizer.ggml.pre). Behaves as llama.cpp's
// llama_tokenize / llama_token_to_piece.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/gguf_reader.h"
#include "vlkv/status.h"

namespace vlkv {

using TokenId = int32_t;

// llama.cpp's token attributes (tokenizer.ggml.token_type values).
enum class TokenType : int32_t {
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

class Tokenizer {
 public:
  // NotFound if the GGUF has no tokenizer, Unsupported for an unknown model/pre type.
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& gguf);
  virtual ~Tokenizer() = default;

  // add_special: prepend BOS (and append EOS) as tokenizer.ggml.add_bos_token/add_eos_token say.
  // parse_special: recognise control/user-defined token texts (e.g. "<|im_start|>") in text,
  // but for those overlapping a byte range [first, second) of `plain` (text a client typed:
  // its "</s>" is four characters, not the end token).
  virtual std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special,
                                      std::span<const std::pair<size_t, size_t>> plain = {}) const = 0;
  // The bytes of one token as llama.cpp's llama_token_to_piece(special=false) renders them
  // (SPM: "▁" -> " ", <0xNN> -> byte; BPE: byte-level unicode -> bytes; control tokens -> "").
  virtual std::string token_to_piece(TokenId id) const = 0;
  // Concatenated pieces (llama_detokenize with remove_special=false, unparse_special=false).
  std::string decode(const std::vector<TokenId>& ids) const;

  virtual int32_t n_vocab() const = 0;
  virtual TokenId bos() const = 0;   // -1 if none
  virtual TokenId eos() const = 0;   // -1 if none
  // True for tokens that end generation (EOS, EOT, <|im_end|>, <|endoftext|>...).
  virtual bool is_end_of_generation(TokenId id) const = 0;
  virtual std::string model_name() const = 0;  // "llama" or "gpt2"
  virtual std::string_view token_text(TokenId id) const = 0;  // raw vocabulary entry
  virtual TokenType token_type(TokenId id) const = 0;
  // Id of an exact vocabulary string, -1 if absent.
  virtual TokenId find_token(std::string_view text) const = 0;
  // libmtmd's lookup_token: the lowest id whose piece, rendered as llama_token_to_piece(special=true)
  // does (control/unknown tokens as their text), equals piece; -1 if none. "\n" finds SPM's byte
  // token <0x0A>, "<global-img>" its control entry. Linear in n_vocab (string compares only).
  TokenId find_token_by_piece(std::string_view piece) const;
};

}  // namespace vlkv
