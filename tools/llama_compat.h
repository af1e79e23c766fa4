// llama.cpp's command-line habits, understood before CLI11 parses: its multi-letter
// single-dash flags (-ngl, -cnv, -hf, -np ...) would otherwise be read as bundles of
// one-letter flags ("-ngl 99" -> "-n gl 99") and give nonsense errors. Flags that mean
// the same here are renamed, GPU-only flags are dropped with a one-line note (vlkv runs on
// the CPU), and the llama.cpp flags that have no equivalent are refused with a hint.
#pragma once

#include <string>
#include <vector>

namespace vlkv::cli {

struct TranslatedArgs {
  std::vector<std::string> args;   // what CLI11 parses, in command-line order
  std::vector<std::string> notes;  // one line each, for stderr ("vlkv: note: ...")
  std::string error;               // not empty: refuse the command line with this message
};

// args: argv[1..]; subcommands: the names vlkv registers. Without a subcommand, a command
// line that starts with a flag (llama-cli's shape: `vlkv -m M -p P`) runs `run`, or `chat`
// with -cnv. Everything after a lone "--" is left as it is.
TranslatedArgs translate_llama_cpp_args(const std::vector<std::string>& args,
                                        const std::vector<std::string>& subcommands);

// The closest of candidates to an unknown flag (edit distance of at most a third of its
// length, at least 2), or "" when none is close: "--ctx" -> "--ctx-size".
std::string closest_flag(const std::string& unknown, const std::vector<std::string>& candidates);

}  // namespace vlkv::cli
