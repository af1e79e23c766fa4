// Chat templates: detection from template texts (llama.cpp's substring rules) and the
// exact prompt text of each built-in family for one fixed conversation.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf_reader.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace vlkv {
namespace {

const std::vector<ChatMessage> kChat = {
    {"system", "You are helpful."},
    {"user", "Hi there"},
    {"assistant", "Hello!"},
    {"user", " How are you? "},
};

std::string apply(ChatTemplate t, bool add_ass = true) { return apply_chat_template(t, kChat, add_ass); }

TEST(ChatTemplate, Chatml) {
  EXPECT_EQ(apply(ChatTemplate::kChatml),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n"
            "<|im_start|>user\nHi there<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\n How are you? <|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(apply(ChatTemplate::kChatml, false).ends_with("<|im_end|>\n"), true);
}

TEST(ChatTemplate, Llama2Variants) {
  EXPECT_EQ(apply(ChatTemplate::kLlama2),
            "[INST] You are helpful.\nHi there [/INST]Hello!</s>[INST]  How are you?  [/INST]");
  EXPECT_EQ(apply(ChatTemplate::kLlama2Sys),
            "[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi there [/INST]Hello!</s>[INST]  How are you?  [/INST]");
  EXPECT_EQ(apply(ChatTemplate::kLlama2SysBos),
            "[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi there [/INST]Hello!</s><s>[INST]  How are you?  [/INST]");
  EXPECT_EQ(apply(ChatTemplate::kLlama2SysStrip),
            "[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi there [/INST]Hello!</s>[INST] How are you? [/INST]");
}

TEST(ChatTemplate, Vicuna) {
  EXPECT_EQ(apply(ChatTemplate::kVicuna),
            "You are helpful.\n\nUSER: Hi there\nASSISTANT: Hello!</s>\nUSER:  How are you? \nASSISTANT:");
  EXPECT_EQ(apply(ChatTemplate::kVicunaOrca),
            "SYSTEM: You are helpful.\nUSER: Hi there\nASSISTANT: Hello!</s>\nUSER:  How are you? \nASSISTANT:");
  // The tinyvlm-shapes prompt (models/README.md): no space after the marker or after "ASSISTANT:".
  EXPECT_EQ(apply_chat_template(ChatTemplate::kVicuna, {{"user", "<__media__>What color is the circle?"}}, true),
            "USER: <__media__>What color is the circle?\nASSISTANT:");
}

// What add_assistant_prompt appends: where prepare_prompt cuts a conversation's earlier turns.
TEST(ChatTemplate, AssistantOpening) {
  EXPECT_EQ(assistant_opening(ChatTemplate::kChatml), "<|im_start|>assistant\n");
  EXPECT_EQ(assistant_opening(ChatTemplate::kVicuna), "ASSISTANT:");
  EXPECT_EQ(assistant_opening(ChatTemplate::kLlama3), "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(assistant_opening(ChatTemplate::kNone), "");
  for (ChatTemplate t : {ChatTemplate::kChatml, ChatTemplate::kVicuna, ChatTemplate::kLlama3, ChatTemplate::kSmolVlm,
                         ChatTemplate::kGemma, ChatTemplate::kLlama2Sys})
    EXPECT_TRUE(apply(t).ends_with(assistant_opening(t))) << chat_template_name(t);
}

TEST(ChatTemplate, Llama3) {
  EXPECT_EQ(apply(ChatTemplate::kLlama3),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, SmolVlm) {
  EXPECT_EQ(apply(ChatTemplate::kSmolVlm),
            "<|im_start|>You are helpful.\n\nUser: Hi there<end_of_utterance>\n"
            "Assistant: Hello!<end_of_utterance>\nUser:  How are you? <end_of_utterance>\nAssistant:");
}

TEST(ChatTemplate, OtherFamilies) {
  EXPECT_EQ(apply(ChatTemplate::kPhi3),
            "<|system|>\nYou are helpful.<|end|>\n<|user|>\nHi there<|end|>\n<|assistant|>\nHello!<|end|>\n"
            "<|user|>\n How are you? <|end|>\n<|assistant|>\n");
  EXPECT_EQ(apply(ChatTemplate::kPhi4),
            "<|im_start|>system<|im_sep|>You are helpful.<|im_end|><|im_start|>user<|im_sep|>Hi there<|im_end|>"
            "<|im_start|>assistant<|im_sep|>Hello!<|im_end|><|im_start|>user<|im_sep|> How are you? <|im_end|>"
            "<|im_start|>assistant<|im_sep|>");
  EXPECT_EQ(apply(ChatTemplate::kGemma),
            "<start_of_turn>user\nYou are helpful.\n\nHi there<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nHow are you?<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(apply(ChatTemplate::kZephyr),
            "<|system|>\nYou are helpful.<|endoftext|>\n<|user|>\nHi there<|endoftext|>\n<|assistant|>\nHello!<|endoftext|>\n"
            "<|user|>\n How are you? <|endoftext|>\n<|assistant|>\n");
  EXPECT_EQ(apply(ChatTemplate::kFalcon3),
            "<|system|>\nYou are helpful.\n<|user|>\nHi there\n<|assistant|>\nHello!\n<|user|>\n How are you? \n<|assistant|>\n");
  EXPECT_EQ(apply(ChatTemplate::kMistralV7),
            "[SYSTEM_PROMPT] You are helpful.[/SYSTEM_PROMPT][INST] Hi there[/INST] Hello!</s>[INST]  How are you? [/INST]");
  EXPECT_EQ(apply(ChatTemplate::kMistralV3),
            "[INST] You are helpful.\n\nHi there[/INST] Hello!</s>[INST]  How are you? [/INST]");
  EXPECT_EQ(apply(ChatTemplate::kMistralV1),
            " [INST] You are helpful.\n\nHi there [/INST] Hello!</s> [INST]  How are you?  [/INST]");
  EXPECT_EQ(apply(ChatTemplate::kNone), "You are helpful.Hi thereHello! How are you? ");
}

TEST(ChatTemplate, Detection) {
  // tinyvlm-shapes' tokenizer.chat_template (LLaVA-1.5 Vicuna form).
  const std::string tinyvlm =
      "{% for message in messages %}{% if message['role'] == 'system' %}{{ message['content'] }}\n\n"
      "{% elif message['role'] == 'user' %}USER: {{ message['content'] }}\n"
      "{% elif message['role'] == 'assistant' %}ASSISTANT: {{ message['content'] }}</s>\n"
      "{% endif %}{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}";
  EXPECT_EQ(detect_chat_template(tinyvlm), ChatTemplate::kVicuna);
  EXPECT_EQ(detect_chat_template("{{ 'SYSTEM: ' }}USER: x ASSISTANT: y"), ChatTemplate::kVicunaOrca);
  EXPECT_EQ(detect_chat_template("{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}"), ChatTemplate::kChatml);
  EXPECT_EQ(detect_chat_template("<|im_start|>User:{{ content }}<end_of_utterance>"), ChatTemplate::kSmolVlm);
  EXPECT_EQ(detect_chat_template("<|im_start|>{{ role }}<|im_sep|>"), ChatTemplate::kPhi4);
  EXPECT_EQ(detect_chat_template("{{ bos_token }}[INST] {{ content }} [/INST]"), ChatTemplate::kLlama2);
  EXPECT_EQ(detect_chat_template("[INST] <<SYS>>\n{{ s }}\n<</SYS>>"), ChatTemplate::kLlama2Sys);
  EXPECT_EQ(detect_chat_template("{{ bos_token + '[INST] ' }}<<SYS>>"), ChatTemplate::kLlama2SysBos);
  EXPECT_EQ(detect_chat_template("[INST] {{ content.strip() }}"), ChatTemplate::kLlama2SysStrip);
  EXPECT_EQ(detect_chat_template("[SYSTEM_PROMPT][INST]"), ChatTemplate::kMistralV7);
  EXPECT_EQ(detect_chat_template("<|start_header_id|>{{ role }}<|end_header_id|>"), ChatTemplate::kLlama3);
  EXPECT_EQ(detect_chat_template("<start_of_turn>user"), ChatTemplate::kGemma);
  EXPECT_EQ(detect_chat_template("<|user|>\n{{ c }}<|end|>\n<|assistant|>"), ChatTemplate::kPhi3);
  EXPECT_EQ(detect_chat_template("chatml"), ChatTemplate::kChatml);  // a bare family name
  EXPECT_EQ(detect_chat_template("GPT4 Correct User:"), ChatTemplate::kNone);  // known to llama.cpp, not built in
  EXPECT_EQ(detect_chat_template("something else"), ChatTemplate::kNone);
  EXPECT_EQ(detect_chat_template(""), ChatTemplate::kNone);
  EXPECT_EQ(chat_template_name(ChatTemplate::kSmolVlm), "smolvlm");
  EXPECT_EQ(chat_template_name(ChatTemplate::kNone), "none");
  EXPECT_EQ(chat_template_from_name("vicuna"), ChatTemplate::kVicuna);
  EXPECT_FALSE(chat_template_from_name("jinja").has_value());
}

TEST(ChatTemplate, FromGgufAndTokenized) {
  auto gguf = GgufFile::open(std::string(VLKV_TEST_DATA) + "/fixtures/models/stories260K.gguf");
  ASSERT_TRUE(gguf.is_ok()) << gguf.status().message();
  EXPECT_EQ(detect_chat_template(*gguf.value()), ChatTemplate::kNone);  // stories260K has no template
  auto tok = Tokenizer::from_gguf(*gguf.value());
  ASSERT_TRUE(tok.is_ok());
  // tinyvlm-shapes shares this vocabulary: "USER: " is <s> then ▁ U S E R : ▁ (models/README.md).
  const auto ids = tok.value()->encode("USER: ", true, true);
  EXPECT_EQ(ids.size(), 8u);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(tok.value()->decode(ids), " USER: ");
}

}  // namespace
}  // namespace vlkv
