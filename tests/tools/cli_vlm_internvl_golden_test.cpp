// InternVL (internvl projector, qwen2 text) at the level a user sees: `vlkv run --image` against
// llama.cpp's runs (tests/data/fixtures/vlm/internvl). 64x64: <img> 2x2 tiles + overview </img>
// = 45 positions; 128x48: 4x2 tiles + overview = 61 positions.
#include "vlm_batch2_golden.h"

namespace vlkv {
namespace {

const batch2::Family kInternvl = {"internvl", "internvl-tiny-text.gguf", "mmproj-tiny-internvl.gguf", false};

TEST(CliVlmInternvlGolden, SquareImageMatchesLlamaCpp) { batch2::expect_run_matches_llama_cpp(kInternvl, "vlm_p1"); }

TEST(CliVlmInternvlGolden, WideImageMatchesLlamaCpp) {
  batch2::expect_run_matches_llama_cpp(kInternvl, "vlm_p1_wide");
}

}  // namespace
}  // namespace vlkv
