#include "text/chat_template.h"

#include <cctype>
#include <utility>

#include "base/log.h"

namespace vlkv {
namespace {

constexpr std::pair<std::string_view, ChatTemplate> kNames[] = {
    {"none", ChatTemplate::kNone},
    {"chatml", ChatTemplate::kChatml},
    {"llama2", ChatTemplate::kLlama2},
    {"llama2-sys", ChatTemplate::kLlama2Sys},
    {"llama2-sys-bos", ChatTemplate::kLlama2SysBos},
    {"llama2-sys-strip", ChatTemplate::kLlama2SysStrip},
    {"mistral-v1", ChatTemplate::kMistralV1},
    {"mistral-v3", ChatTemplate::kMistralV3},
    {"mistral-v3-tekken", ChatTemplate::kMistralV3Tekken},
    {"mistral-v7", ChatTemplate::kMistralV7},
    {"mistral-v7-tekken", ChatTemplate::kMistralV7Tekken},
    {"phi3", ChatTemplate::kPhi3},
    {"phi4", ChatTemplate::kPhi4},
    {"falcon3", ChatTemplate::kFalcon3},
    {"zephyr", ChatTemplate::kZephyr},
    {"gemma", ChatTemplate::kGemma},
    {"vicuna", ChatTemplate::kVicuna},
    {"vicuna-orca", ChatTemplate::kVicunaOrca},
    {"llama3", ChatTemplate::kLlama3},
    {"smolvlm", ChatTemplate::kSmolVlm},
};

// llama.cpp's trim: C-locale isspace at both ends.
std::string trim(std::string_view s) {
  size_t begin = 0, end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return std::string(s.substr(begin, end - begin));
}

ChatTemplate unsupported_family(const char* family) {
  VLKV_LOG_WARN("chat template: '%s' family is not built in; using the prompt as given", family);
  return ChatTemplate::kNone;
}

// "<|role|>\n" + content + end per message, then "<|assistant|>\n" to open the reply
// (Phi-3, Falcon 3 and Zephyr differ only in the turn's end).
std::string pipe_role_turns(const std::vector<ChatMessage>& messages, const char* end, bool add_ass) {
  std::string out;
  for (const auto& m : messages) out += "<|" + m.role + "|>\n" + m.content + end;
  if (add_ass) out += "<|assistant|>\n";
  return out;
}

}  // namespace

std::string_view chat_template_name(ChatTemplate tmpl) {
  for (const auto& [name, t] : kNames) {
    if (t == tmpl) return name;
  }
  return "none";
}

std::optional<ChatTemplate> chat_template_from_name(std::string_view name) {
  for (const auto& [n, t] : kNames) {
    if (n == name) return t;
  }
  return std::nullopt;
}

ChatTemplate detect_chat_template(std::string_view tmpl) {
  if (tmpl.empty()) return ChatTemplate::kNone;
  if (auto named = chat_template_from_name(tmpl)) return *named;
  const auto has = [&](std::string_view s) { return tmpl.find(s) != std::string_view::npos; };
  if (has("<|im_start|>")) {
    if (has("<|im_sep|>")) return ChatTemplate::kPhi4;
    return has("<end_of_utterance>") ? ChatTemplate::kSmolVlm : ChatTemplate::kChatml;
  }
  if (tmpl.starts_with("mistral") || has("[INST]")) {
    if (has("[SYSTEM_PROMPT]")) return ChatTemplate::kMistralV7;
    if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
      if (has(" [INST]")) return ChatTemplate::kMistralV1;
      if (has("\"[INST]\"")) return ChatTemplate::kMistralV3Tekken;
      return ChatTemplate::kMistralV3;
    }
    if (has("content.strip()")) return ChatTemplate::kLlama2SysStrip;
    if (has("bos_token + '[INST]")) return ChatTemplate::kLlama2SysBos;
    if (has("<<SYS>>")) return ChatTemplate::kLlama2Sys;
    return ChatTemplate::kLlama2;
  }
  if (has("<|assistant|>") && has("<|end|>")) return ChatTemplate::kPhi3;
  if (has("[gMASK]<sop>")) return unsupported_family("chatglm4");
  if (has("<|assistant|>") && has("<|user|>")) {
    return has("</s>") ? ChatTemplate::kFalcon3 : unsupported_family("glmedge");
  }
  if (has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>")) return unsupported_family("glmedge");
  if (has("<|user|>") && has("<|endoftext|>")) return ChatTemplate::kZephyr;
  if (has("bos_token + message['role']")) return unsupported_family("monarch");
  if (has("<start_of_turn>")) return ChatTemplate::kGemma;
  if (has("'\\n\\nAssistant: ' + eos_token")) return unsupported_family("orion");
  if (has("GPT4 Correct ")) return unsupported_family("openchat");
  if (has("USER: ") && has("ASSISTANT: ")) {
    return has("SYSTEM: ") ? ChatTemplate::kVicunaOrca : ChatTemplate::kVicuna;
  }
  if (has("### Instruction:") && has("<|EOT|>")) return unsupported_family("deepseek");
  if (has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>")) return unsupported_family("command-r");
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return ChatTemplate::kLlama3;
  return ChatTemplate::kNone;
}

ChatTemplate detect_chat_template(const GgufFile& gguf) {
  if (gguf.find("tokenizer.chat_template") == nullptr) return ChatTemplate::kNone;
  auto text = gguf.get_string("tokenizer.chat_template");
  if (!text.is_ok()) {
    VLKV_LOG_WARN("chat template: %s", text.status().message().c_str());
    return ChatTemplate::kNone;
  }
  return detect_chat_template(text.value());
}

std::string apply_chat_template(ChatTemplate tmpl, const std::vector<ChatMessage>& messages,
                                bool add_assistant_prompt) {
  std::string out;
  const bool add_ass = add_assistant_prompt;
  switch (tmpl) {
    case ChatTemplate::kNone:
      for (const auto& m : messages) out += m.content;
      break;
    case ChatTemplate::kChatml:
      for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (add_ass) out += "<|im_start|>assistant\n";
      break;
    case ChatTemplate::kMistralV7:
    case ChatTemplate::kMistralV7Tekken: {
      const std::string sp = tmpl == ChatTemplate::kMistralV7 ? " " : "";
      for (const auto& m : messages) {
        if (m.role == "system") {
          out += "[SYSTEM_PROMPT]" + sp + m.content + "[/SYSTEM_PROMPT]";
        } else if (m.role == "user") {
          out += "[INST]" + sp + m.content + "[/INST]";
        } else {
          out += sp + m.content + "</s>";
        }
      }
      break;
    }
    case ChatTemplate::kMistralV1:
    case ChatTemplate::kMistralV3:
    case ChatTemplate::kMistralV3Tekken: {
      const std::string leading = tmpl == ChatTemplate::kMistralV1 ? " " : "";
      const std::string trailing = tmpl == ChatTemplate::kMistralV3Tekken ? "" : " ";
      const bool trim_assistant = tmpl == ChatTemplate::kMistralV3;
      bool inside_turn = false;
      for (const auto& m : messages) {
        if (!inside_turn) {
          out += leading + "[INST]" + trailing;
          inside_turn = true;
        }
        if (m.role == "system") {
          out += m.content + "\n\n";
        } else if (m.role == "user") {
          out += m.content + leading + "[/INST]";
        } else {
          out += trailing + (trim_assistant ? trim(m.content) : m.content) + "</s>";
          inside_turn = false;
        }
      }
      break;
    }
    case ChatTemplate::kLlama2:
    case ChatTemplate::kLlama2Sys:
    case ChatTemplate::kLlama2SysBos:
    case ChatTemplate::kLlama2SysStrip: {
      const bool system_blocks = tmpl != ChatTemplate::kLlama2;
      const bool bos_inside = tmpl == ChatTemplate::kLlama2SysBos;
      const bool strip = tmpl == ChatTemplate::kLlama2SysStrip;
      bool inside_turn = true;  // the first [INST] follows the BOS the tokenizer adds
      out += "[INST] ";
      for (const auto& m : messages) {
        const std::string content = strip ? trim(m.content) : m.content;
        if (!inside_turn) {
          inside_turn = true;
          out += bos_inside ? "<s>[INST] " : "[INST] ";
        }
        if (m.role == "system") {
          out += system_blocks ? "<<SYS>>\n" + content + "\n<</SYS>>\n\n" : content + "\n";
        } else if (m.role == "user") {
          out += content + " [/INST]";
        } else {
          out += content + "</s>";
          inside_turn = false;
        }
      }
      break;
    }
    case ChatTemplate::kPhi3:
      out += pipe_role_turns(messages, "<|end|>\n", add_ass);
      break;
    case ChatTemplate::kPhi4:
      for (const auto& m : messages) out += "<|im_start|>" + m.role + "<|im_sep|>" + m.content + "<|im_end|>";
      if (add_ass) out += "<|im_start|>assistant<|im_sep|>";
      break;
    case ChatTemplate::kFalcon3:
      out += pipe_role_turns(messages, "\n", add_ass);
      break;
    case ChatTemplate::kZephyr:
      out += pipe_role_turns(messages, "<|endoftext|>\n", add_ass);
      break;
    case ChatTemplate::kGemma: {
      std::string system_prompt;  // gemma has no system turn: it is prepended to the next user turn
      for (const auto& m : messages) {
        if (m.role == "system") {
          system_prompt += trim(m.content);
          continue;
        }
        const std::string role = m.role == "assistant" ? "model" : m.role;
        out += "<start_of_turn>" + role + "\n";
        if (!system_prompt.empty() && role != "model") {
          out += system_prompt + "\n\n";
          system_prompt.clear();
        }
        out += trim(m.content) + "<end_of_turn>\n";
      }
      if (add_ass) out += "<start_of_turn>model\n";
      break;
    }
    case ChatTemplate::kVicuna:
    case ChatTemplate::kVicunaOrca:
      for (const auto& m : messages) {
        if (m.role == "system") {
          out += tmpl == ChatTemplate::kVicunaOrca ? "SYSTEM: " + m.content + "\n" : m.content + "\n\n";
        } else if (m.role == "user") {
          out += "USER: " + m.content + "\n";
        } else if (m.role == "assistant") {
          out += "ASSISTANT: " + m.content + "</s>\n";
        }
      }
      if (add_ass) out += "ASSISTANT:";
      break;
    case ChatTemplate::kLlama3:
      for (const auto& m : messages) {
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
      }
      if (add_ass) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatTemplate::kSmolVlm:
      out += "<|im_start|>";  // SmolVLM's BOS-like opener; the turns are not chatml
      for (const auto& m : messages) {
        if (m.role == "system") {
          out += m.content + "\n\n";
        } else if (m.role == "user") {
          out += "User: " + m.content + "<end_of_utterance>\n";
        } else {
          out += "Assistant: " + m.content + "<end_of_utterance>\n";
        }
      }
      if (add_ass) out += "Assistant:";
      break;
  }
  return out;
}

}  // namespace vlkv

namespace vlkv {

std::string assistant_opening(ChatTemplate tmpl) {
  const std::vector<ChatMessage> one{{"user", "x"}};
  const std::string without = apply_chat_template(tmpl, one, false);
  const std::string with = apply_chat_template(tmpl, one, true);
  return with.starts_with(without) ? with.substr(without.size()) : std::string();
}

}  // namespace vlkv
