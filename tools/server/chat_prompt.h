// A chat request's prompt text (Prompt::text and Prompt::plain_spans): the model's chat
// template over the conversation, with every message's text marked as typed by the client.
// That text is tokenized without special tokens ("</s>" in a message is four characters, not
// the end token) and a "<__media__>" in it is no media marker (only attached images and
// videos make markers); the template's own markers are special tokens as ever. llama-server
// (2026-08) parses special tokens in the whole templated prompt, so a message can end its
// turn or forge another role's; it randomizes its media marker, which we do by structure.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "vlkv/engine.h"
#include "vlkv/status.h"

namespace vlkv::server {

struct ChatPromptText {
  std::string text;
  std::vector<std::pair<size_t, size_t>> plain_spans;
};

// conversation: the turns with a kMediaMarker at each attached item; media_at[t]: the offsets
// of those markers in turn t's content (every other byte is the client's text).
Result<ChatPromptText> chat_prompt_text(const Engine& model, const std::vector<ChatTurn>& conversation,
                                        const std::vector<std::vector<size_t>>& media_at, size_t n_media);

}  // namespace vlkv::server
