// llama.cpp's flag habits at the CLI (tools/llama_compat.h): its multi-letter single-dash
// flags are renamed or, for GPU-only ones, dropped with a note instead of being read as
// bundles of one-letter flags; -cnv runs chat; an unknown flag gets "did you mean"; `vlkv`
// alone and `vlkv --version` say what the program is; every command's help fits a screen.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli_util.h"
#include "llama_compat.h"

namespace vlkv::cli {
namespace {

const std::vector<std::string> kCommands = {"run", "chat", "serve", "bench", "eval", "methods"};

std::string stories() { return std::string(VLKV_TEST_DATA) + "/fixtures/models/stories260K.gguf"; }

size_t lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

TEST(LlamaCompat, GpuFlagsAreDroppedWithOneNoteEach) {
  const TranslatedArgs t = translate_llama_cpp_args(
      {"run", "-m", "M", "-ngl", "99", "-fa", "on", "--n-gpu-layers", "20", "-nkvo", "-fa", "-p", "hi"}, kCommands);
  EXPECT_TRUE(t.error.empty()) << t.error;
  EXPECT_EQ(t.args, (std::vector<std::string>{"run", "-m", "M", "-p", "hi"}));
  // -ngl, -fa (once, though given twice), --n-gpu-layers, -nkvo.
  ASSERT_EQ(t.notes.size(), 4u);
  EXPECT_EQ(t.notes[0], "-ngl ignored: vlkv runs on the CPU");
}

TEST(LlamaCompat, AFlashAttentionSwitchWithoutAValueKeepsTheNextArgument) {
  const TranslatedArgs t = translate_llama_cpp_args({"run", "-fa", "-p", "hi"}, kCommands);
  EXPECT_EQ(t.args, (std::vector<std::string>{"run", "-p", "hi"}));
}

TEST(LlamaCompat, SameMeaningFlagsAreRenamed) {
  const TranslatedArgs t =
      translate_llama_cpp_args({"serve", "-hf", "ggml-org/x:Q4_K_M", "-np", "4", "-hff=a.gguf"}, kCommands);
  EXPECT_EQ(t.args, (std::vector<std::string>{"serve", "--hf-repo", "ggml-org/x:Q4_K_M", "--parallel", "4",
                                              "--hf-file=a.gguf"}));
  EXPECT_TRUE(t.notes.empty());
}

TEST(LlamaCompat, ConversationModeRunsChatWithThePromptAsSystemPrompt) {
  const TranslatedArgs t = translate_llama_cpp_args({"run", "-m", "M", "-cnv", "-p", "Be brief."}, kCommands);
  EXPECT_EQ(t.args, (std::vector<std::string>{"chat", "-m", "M", "--system", "Be brief."}));
  const TranslatedArgs bare = translate_llama_cpp_args({"-m", "M", "-p", "hi", "-n", "4"}, kCommands);
  EXPECT_EQ(bare.args, (std::vector<std::string>{"run", "-m", "M", "-p", "hi", "-n", "4"}));
  ASSERT_EQ(bare.notes.size(), 1u);
  EXPECT_NE(bare.notes[0].find("running `vlkv run`"), std::string::npos);
}

TEST(LlamaCompat, FlagsWithoutAnEquivalentAreRefusedWithAHint) {
  const TranslatedArgs t = translate_llama_cpp_args({"run", "-ctk", "q8_0"}, kCommands);
  EXPECT_NE(t.error.find("-ctk has no equivalent here"), std::string::npos) << t.error;
  EXPECT_NE(t.error.find("--kv"), std::string::npos) << t.error;
  const TranslatedArgs unknown = translate_llama_cpp_args({"run", "-xyz"}, kCommands);
  EXPECT_NE(unknown.error.find("unknown flag '-xyz'"), std::string::npos) << unknown.error;
}

TEST(LlamaCompat, ValuesAndEverythingAfterADoubleDashAreLeftAlone) {
  const TranslatedArgs t = translate_llama_cpp_args({"run", "--seed", "-1", "--temp", "-0.5", "--", "-ngl"}, kCommands);
  EXPECT_TRUE(t.error.empty()) << t.error;
  EXPECT_EQ(t.args, (std::vector<std::string>{"run", "--seed", "-1", "--temp", "-0.5", "--", "-ngl"}));
}

TEST(LlamaCompat, ClosestFlag) {
  const std::vector<std::string> flags = {"--ctx-size", "--threads", "--temp", "--top-k", "--n-predict"};
  EXPECT_EQ(closest_flag("--ctx", flags), "--ctx-size");
  EXPECT_EQ(closest_flag("--thread", flags), "--threads");
  EXPECT_EQ(closest_flag("--tmep", flags), "--temp");
  EXPECT_EQ(closest_flag("--frobnicate", flags), "");
}

// At the CLI: what used to fail with nonsense ("--n-predict: Value gl not in range").
TEST(CliLlamaFlags, LlamaCppCommandLinesRun) {
  const auto r = testing_cli::run_cli({"-m", stories(), "-p", "Once upon", "-n", "4", "-ngl", "99", "-fa", "on",
                                       "-c", "128", "-t", "1", "-s", "7", "--temp", "0", "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  EXPECT_NE(r.err.find("vlkv: note: -ngl ignored: vlkv runs on the CPU"), std::string::npos) << r.err;
}

TEST(CliLlamaFlags, UnknownFlagsGetTheClosestOne) {
  const auto r = testing_cli::run_cli({"run", "-m", stories(), "--n-predic", "4"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown flag '--n-predic' for `vlkv run` (did you mean --n-predict?)"), std::string::npos)
      << r.err;
  const auto cmd = testing_cli::run_cli({"rnu"});
  EXPECT_EQ(cmd.exit_code, 2);
  EXPECT_NE(cmd.err.find("no command 'rnu' (did you mean run?)"), std::string::npos) << cmd.err;
  const auto hf = testing_cli::run_cli({"run", "-hf"});  // was: -h -f, the whole help page and exit 0
  EXPECT_EQ(hf.exit_code, 2) << hf.out;
  EXPECT_EQ(hf.out, "");
}

TEST(CliLlamaFlags, OverviewAndVersion) {
  const auto bare = testing_cli::run_cli({});
  EXPECT_EQ(bare.exit_code, 0);
  for (const char* c : {"run ", "chat ", "serve ", "bench ", "eval ", "methods ", "Usage: vlkv COMMAND"})
    EXPECT_NE(bare.out.find(c), std::string::npos) << c;
  EXPECT_LE(lines(bare.out), 30u);
  const auto v = testing_cli::run_cli({"--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.out.rfind("vlkv version ", 0), 0u) << v.out;
  EXPECT_NE(v.out.find("SIMD: "), std::string::npos) << v.out;
}

TEST(CliLlamaFlags, EveryCommandsHelpFitsAScreen) {
  for (const char* cmd : {"run", "chat", "serve", "bench", "eval", "calibrate", "methods", "info", "quantize",
                          "gen-model", "bench-serve"}) {
    const auto r = testing_cli::run_cli({cmd, "--help"});
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_LE(lines(r.out), 60u) << "vlkv " << cmd << " --help:\n" << r.out;
  }
  const auto chat = testing_cli::run_cli({"chat", "--help"});
  for (const char* slash : {"/image", "/video", "/save", "/load", "/kv", "/quit"})
    EXPECT_NE(chat.out.find(slash), std::string::npos) << slash;
}

}  // namespace
}  // namespace vlkv::cli
