// Built-in chat templates: recognise the family of a model's tokenizer.chat_template
// (substring heuristics of llama.cpp's llm_chat_detect_template, not a Jinja engine) and
// format a conversation exactly as llama.cpp's llm_chat_apply_template does.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_reader.h"

namespace vlkv {

enum class ChatTemplate {
  kNone,             // no template or an unrecognised one: the prompt is used as given
  kChatml,           // <|im_start|>role\n...<|im_end|>\n
  kLlama2,           // [INST] ... [/INST] (system message inlined)
  kLlama2Sys,        // with <<SYS>> blocks
  kLlama2SysBos,     // ... and <s> before every later [INST]
  kLlama2SysStrip,   // ... and contents trimmed
  kMistralV1,
  kMistralV3,
  kMistralV3Tekken,
  kMistralV7,
  kMistralV7Tekken,
  kPhi3,
  kPhi4,
  kFalcon3,
  kZephyr,
  kGemma,
  kVicuna,           // LLaVA-1.5 / tinyvlm-shapes: "USER: ...\nASSISTANT:"
  kVicunaOrca,
  kLlama3,
  kSmolVlm,          // SmolVLM / Idefics3: "<|im_start|>User: ...<end_of_utterance>\nAssistant:"
};

struct ChatMessage {
  std::string role;     // "system", "user", "assistant"
  std::string content;  // may contain media markers (e.g. "<__media__>"); copied verbatim
};

// llama.cpp's name for the family ("chatml", "llama2-sys", "vicuna", "smolvlm" ...), "none" for kNone.
std::string_view chat_template_name(ChatTemplate tmpl);
// Inverse of chat_template_name (for a command-line override); nullopt for unknown names.
std::optional<ChatTemplate> chat_template_from_name(std::string_view name);

// Family of a template text: an exact family name, else llama.cpp's substring checks in
// llama.cpp's order. Families llama.cpp knows but we do not format map to kNone.
ChatTemplate detect_chat_template(std::string_view template_text);
// From the GGUF key tokenizer.chat_template; kNone when it is absent.
ChatTemplate detect_chat_template(const GgufFile& gguf);

// The prompt text (special tokens as text: tokenize it with parse_special). With
// add_assistant_prompt the text ends with the opening of an assistant turn.
// kNone concatenates the contents unchanged.
std::string apply_chat_template(ChatTemplate tmpl, const std::vector<ChatMessage>& messages,
                                bool add_assistant_prompt);

// The text add_assistant_prompt appends (chatml: "<|im_start|>assistant\n"): where an answer
// begins, so where a conversation's next turn continues a prompt. Empty for kNone.
std::string assistant_opening(ChatTemplate tmpl);

}  // namespace vlkv
