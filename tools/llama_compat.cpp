#include "llama_compat.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <set>
#include <string_view>

namespace vlkv::cli {
namespace {

// What a llama.cpp flag becomes here.
enum class Action {
  kRename,  // the same meaning under another name: text is the vlkv flag
  kDrop,    // no effect on a CPU engine (or always on here): dropped, text is the note
  kRefuse,  // no equivalent: the command line is refused, text is the hint
  kChat,    // conversation mode: `run` becomes `chat`
};
// How many arguments follow the flag: none, one, or an optional on/off/auto (llama.cpp's -fa).
enum class Arity { kNone, kOne, kOptionalSwitch };

struct LlamaFlag {
  std::array<std::string_view, 4> names;  // unused slots empty
  Arity arity;
  Action action;
  std::string_view text;
};

constexpr std::string_view kCpuNote = "vlkv runs on the CPU";
constexpr std::string_view kKvHint =
    "vlkv stores the KV cache by method, not by type: --kv f16|int8|int4|kivi2|akvq_vl|vidkv|zipvl|... "
    "(`vlkv methods` lists them)";

// llama.cpp (2026-08, common/arg.cpp) flags whose spelling CLI11 cannot take or that need a word.
constexpr LlamaFlag kLlamaFlags[] = {
    {{"-hf", "-hfr", "--hf-repo"}, Arity::kOne, Action::kRename, "--hf-repo"},
    {{"-hff"}, Arity::kOne, Action::kRename, "--hf-file"},
    {{"-hft"}, Arity::kOne, Action::kRename, "--hf-token"},
    {{"-mmu"}, Arity::kOne, Action::kRename, "--mmproj-url"},
    {{"-np"}, Arity::kOne, Action::kRename, "--parallel"},
    {{"-sys", "--system-prompt"}, Arity::kOne, Action::kRename, "--system"},
    {{"-cnv", "--conversation", "-i", "--interactive"}, Arity::kNone, Action::kChat, ""},
    {{"-if", "--interactive-first"}, Arity::kNone, Action::kChat, ""},
    {{"-no-cnv", "--no-conversation", "-st", "--single-turn"}, Arity::kNone, Action::kDrop,
     "`vlkv run` answers one prompt; `vlkv chat` is the conversation"},
    {{"-ngl", "--n-gpu-layers", "--gpu-layers"}, Arity::kOne, Action::kDrop, kCpuNote},
    {{"-ngld", "--n-gpu-layers-draft", "--gpu-layers-draft"}, Arity::kOne, Action::kDrop, kCpuNote},
    {{"-mg", "--main-gpu"}, Arity::kOne, Action::kDrop, kCpuNote},
    {{"-ts", "--tensor-split"}, Arity::kOne, Action::kDrop, kCpuNote},
    {{"-sm", "--split-mode"}, Arity::kOne, Action::kDrop, kCpuNote},
    {{"-dev", "--device"}, Arity::kOne, Action::kDrop, kCpuNote},
    {{"-ot", "--override-tensor"}, Arity::kOne, Action::kDrop, kCpuNote},
    {{"-nkvo", "--no-kv-offload", "-kvo", "--kv-offload"}, Arity::kNone, Action::kDrop, kCpuNote},
    {{"--no-mmproj-offload", "--mmproj-offload", "--no-op-offload"}, Arity::kNone, Action::kDrop, kCpuNote},
    {{"-fa", "--flash-attn"}, Arity::kOptionalSwitch, Action::kDrop,
     "vlkv's attention is always fused (flash-decoding over the compressed cache)"},
    {{"-cb", "--cont-batching"}, Arity::kNone, Action::kDrop, "vlkv serve always batches continuously"},
    {{"--jinja"}, Arity::kNone, Action::kDrop, "vlkv applies the model's chat template itself"},
    {{"-co", "--color"}, Arity::kNone, Action::kDrop, "vlkv prints plain text"},
    {{"-ctk", "--cache-type-k", "-ctv", "--cache-type-v"}, Arity::kOne, Action::kRefuse, kKvHint},
    {{"-tb", "--threads-batch"}, Arity::kOne, Action::kRefuse, "vlkv uses -t/--threads for prompt and answer alike"},
    {{"-ub", "--ubatch-size"}, Arity::kOne, Action::kRefuse, "vlkv's prompt batch is -b/--batch-size"},
    {{"-mu", "--model-url"}, Arity::kOne, Action::kRefuse,
     "use -hf USER/REPO[:QUANT] (or --hf-file), or download the file and give -m"},
};

const LlamaFlag* find_flag(std::string_view name) {
  for (const LlamaFlag& f : kLlamaFlags)
    for (std::string_view n : f.names)
      if (!n.empty() && n == name) return &f;
  return nullptr;
}

bool is_switch_word(std::string_view s) {
  return s == "on" || s == "off" || s == "auto" || s == "1" || s == "0" || s == "true" || s == "false";
}

// "-ab...": one dash and two or more letters, the shape llama.cpp uses and CLI11 reads as
// bundled one-letter flags. Negative numbers ("-1", "-0.5") are values, not flags.
bool is_multi_letter_short_flag(std::string_view s) {
  return s.size() >= 3 && s[0] == '-' && s[1] != '-' && std::isalpha(static_cast<unsigned char>(s[1])) &&
         std::isalpha(static_cast<unsigned char>(s[2]));
}

std::string_view flag_name(std::string_view arg) {  // "--temp=0.2" -> "--temp"
  const size_t eq = arg.find('=');
  return eq == std::string_view::npos ? arg : arg.substr(0, eq);
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest_flag(const std::string& unknown, const std::vector<std::string>& candidates) {
  const std::string_view u = flag_name(unknown);
  std::string best;
  size_t best_distance = std::max<size_t>(2, u.size() / 3) + 1;
  for (const std::string& c : candidates) {
    if (c == u) continue;
    // A prefix of a longer flag ("--ctx" of "--ctx-size") is the likeliest meaning.
    const size_t d = (u.size() >= 4 && c.rfind(u, 0) == 0) ? 1 : edit_distance(u, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

TranslatedArgs translate_llama_cpp_args(const std::vector<std::string>& in, const std::vector<std::string>& subcommands) {
  TranslatedArgs out;
  const auto is_subcommand = [&](const std::string& s) {
    return std::find(subcommands.begin(), subcommands.end(), s) != subcommands.end();
  };
  const auto is_chat_flag = [](const std::string& s) {
    const LlamaFlag* f = find_flag(flag_name(s));
    return f && f->action == Action::kChat;
  };
  // The subcommand: given first, or (llama-cli's shape) implied by a command line of flags.
  std::string command;
  size_t first = 0;
  if (!in.empty() && is_subcommand(in[0])) {
    command = in[0];
    first = 1;
  } else if (!in.empty() && in[0].size() > 1 && in[0][0] == '-' && in[0] != "-h" && in[0] != "--help" &&
             in[0] != "--version") {
    command = std::any_of(in.begin(), in.end(), is_chat_flag) ? "chat" : "run";
    out.notes.push_back("no command given: running `vlkv " + command + "` (`vlkv --help` lists the commands)");
  }
  if (command == "run" && std::any_of(in.begin() + static_cast<std::ptrdiff_t>(first), in.end(), is_chat_flag)) {
    command = "chat";
    out.notes.push_back("-cnv: running `vlkv chat` (vlkv's conversation command)");
  }
  // In llama-cli's conversation mode -p is the system prompt.
  const bool prompt_is_system = command == "chat" && (first == 0 || in[0] != "chat");
  if (!command.empty()) out.args.push_back(command);

  std::set<std::string_view> noted;
  for (size_t i = first; i < in.size(); ++i) {
    const std::string& arg = in[i];
    if (arg == "--") {  // the rest is left as it is
      out.args.insert(out.args.end(), in.begin() + static_cast<std::ptrdiff_t>(i), in.end());
      break;
    }
    const std::string_view name = flag_name(arg);
    const bool has_inline_value = name.size() != arg.size();
    if (prompt_is_system && (name == "-p" || name == "--prompt")) {
      out.args.push_back(has_inline_value ? "--system" + arg.substr(name.size()) : "--system");
      continue;
    }
    const LlamaFlag* f = find_flag(name);
    if (!f) {
      if (is_multi_letter_short_flag(arg)) {
        out.error = "unknown flag '" + arg + "': vlkv's flags are one letter after '-' or words after '--' (`vlkv " +
                    (command.empty() ? std::string("COMMAND") : command) + " --help` lists them)";
        return out;
      }
      out.args.push_back(arg);
      continue;
    }
    // The flag's value: inline ("-ngl=99"), the next argument, or an optional on/off word.
    size_t n_values = 0;
    if (!has_inline_value && f->arity == Arity::kOne && i + 1 < in.size()) n_values = 1;
    if (!has_inline_value && f->arity == Arity::kOptionalSwitch && i + 1 < in.size() && is_switch_word(in[i + 1]))
      n_values = 1;
    switch (f->action) {
      case Action::kRename:  // its value, if any, follows as it is: CLI11 takes it (or reports it missing)
        out.args.push_back(std::string(f->text) + std::string(arg.substr(name.size())));
        n_values = 0;
        break;
      case Action::kDrop:
        if (noted.insert(name).second) out.notes.push_back(std::string(name) + " ignored: " + std::string(f->text));
        break;
      case Action::kChat:
        if (command != "chat" && noted.insert(name).second)
          out.notes.push_back(std::string(name) + " ignored: only `vlkv chat` holds a conversation in the terminal");
        break;
      case Action::kRefuse:
        out.error = "llama.cpp's " + std::string(name) + " has no equivalent here: " + std::string(f->text);
        return out;
    }
    i += n_values;
  }
  return out;
}

}  // namespace vlkv::cli
