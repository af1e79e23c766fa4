#include "server/logprobs_json.h"

namespace vlkv::server {
namespace {

using nlohmann::json;

json bytes_of(const std::string& s) {
  json b = json::array();
  for (char c : s) b.push_back(static_cast<uint8_t>(c));
  return b;
}

json chat_entry(const TokenLogprob& t, const std::string& piece) {
  return {{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes_of(piece)}};
}

}  // namespace

json logprobs_json(Endpoint endpoint, const std::vector<StepLogprobs>& steps, const Engine& model, size_t* text_offset) {
  if (endpoint == Endpoint::kChat) {
    json content = json::array();
    for (const StepLogprobs& s : steps) {
      json e = chat_entry(s.chosen, model.token_to_piece(s.chosen.token));
      json top = json::array();
      for (const TokenLogprob& t : s.top) top.push_back(chat_entry(t, model.token_to_piece(t.token)));
      e["top_logprobs"] = std::move(top);
      content.push_back(std::move(e));
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
  for (const StepLogprobs& s : steps) {
    const std::string piece = model.token_to_piece(s.chosen.token);
    tokens.push_back(piece);
    token_logprobs.push_back(s.chosen.logprob);
    json top = json::object();
    for (const TokenLogprob& t : s.top) {
      const std::string alt = model.token_to_piece(t.token);
      if (!top.contains(alt)) top[alt] = t.logprob;  // two tokens of the same text: the likelier one
    }
    top_logprobs.push_back(std::move(top));
    offsets.push_back(*text_offset);
    *text_offset += piece.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(offsets)}};
}

}  // namespace vlkv::server
