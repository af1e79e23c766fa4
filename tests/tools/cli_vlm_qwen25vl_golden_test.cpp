// Qwen2.5-VL (qwen2.5vl_merger + qwen2vl text) at the level a user sees: `vlkv run --image`
// against llama.cpp's runs (vlm_batch2_golden.h: chunks, n_positions, greedy bytes up to the
// first near-tie), and every registered KV method on the same question (greedy, no error,
// KV bytes held > 0).
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "kv/method_registry.h"
#include "vlm_batch2_golden.h"

namespace vlkv {
namespace {

const batch2::Family kQwen25Vl{"qwen25vl", "qwen25vl-tiny-text.gguf", "mmproj-tiny-qwen25vl.gguf", /*mrope=*/true};

TEST(CliVlmQwen25VlGolden, SquareImageMatchesLlamaCpp) { batch2::expect_run_matches_llama_cpp(kQwen25Vl, "vlm_p1"); }

// 128x48 fitted into 140x56 with black bands (llama.cpp's resize), two 112-px windows.
TEST(CliVlmQwen25VlGolden, WideImageMatchesLlamaCpp) {
  batch2::expect_run_matches_llama_cpp(kQwen25Vl, "vlm_p1_wide");
}

// "... held 512 B/token, ..." -> 512; -1 if absent.
int64_t held_bytes_per_token(const std::string& err) {
  const size_t at = err.find("held ");
  if (at == std::string::npos) return -1;
  size_t e = at + 5;
  while (e < err.size() && std::isdigit(static_cast<unsigned char>(err[e]))) ++e;
  return e == at + 5 ? -1 : std::stoll(err.substr(at + 5, e - at - 5));
}

TEST(CliVlmQwen25VlConformance, EveryKvMethodRunsAnImageQuestion) {
  const std::string f = batch2::fixtures();
  std::vector<std::string> methods;
  for (const MethodInfo* m : list_methods()) methods.push_back(m->name);
  methods.push_back("qcache_vla+vidkv");  // the composition the papers call orthogonal
  ASSERT_GE(methods.size(), 10u);
  for (const std::string& kv : methods) {
    SCOPED_TRACE(kv);
    const testing_cli::CliResult r = testing_cli::run_cli(
        {"run", "-m", f + "/models/qwen25vl-tiny-text.gguf", "--mmproj", f + "/models/mmproj-tiny-qwen25vl.gguf",
         "--image", f + "/images/test_image_128x48.png", "-p", batch2::read_file(f + "/prompts/vlm_p1.txt"), "-n",
         "8", "--temp", "0", "--ignore-eos", "--no-template", "--kv", kv, "-t", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(r.out.empty());
    EXPECT_EQ(batch2::reported_prompt_tokens(r.err), 35) << r.err;
    EXPECT_GT(held_bytes_per_token(r.err), 0) << r.err;
  }
}

}  // namespace
}  // namespace vlkv
