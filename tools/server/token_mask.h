// Which vocabulary tokens may come next under a JsonRecognizer: every token's bytes tried
// on a copy of the recognizer, walking the tokens in byte order so that a shared prefix is
// fed once (a trie walk without the trie). The vocabulary's bytes are read once per model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/json_recognizer.h"
#include "vlkv/engine.h"

namespace vlkv::server {

struct TokenTable {
  std::vector<std::string> pieces;  // [n_vocab] token_to_piece (control tokens: "")
  std::vector<int32_t> order;       // token ids with a non-empty piece, sorted by their bytes
  std::vector<uint32_t> common;     // [order.size()] bytes order[i]'s piece shares with order[i-1]'s
  std::vector<int32_t> end_of_generation;  // tokens that end generation
  size_t max_piece = 0;

  static std::shared_ptr<const TokenTable> build(const Engine& model);
};

// The table of this model, built on first use and kept (thread safe).
std::shared_ptr<const TokenTable> token_table_for(const Engine& model);

// allowed[t] = 1 when token t's bytes may follow the recognizer's state, else 0
// (end-of-generation and control tokens: 0; the caller decides about those).
// scratch: reused between calls.
void allowed_tokens(const TokenTable& table, const JsonRecognizer& state, std::vector<JsonRecognizer>& scratch,
                    std::vector<uint8_t>* allowed);

}  // namespace vlkv::server
