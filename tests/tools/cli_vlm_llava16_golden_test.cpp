// `vlkv run --image` on LLaVA-NeXT (stories260K + mmproj-tiny-llava16, pinpoint tiling)
// against llama.cpp: the prompt's chunks and n_positions (103 for the 64x64 image: 4 tiles
// + overview; 87 for 128x48: 3 tiles + overview) and the greedy bytes up to the first
// near-tie step (vlm_batch2_golden.h).
#include "vlm_batch2_golden.h"

namespace vlkv {
namespace {

constexpr batch2::Family kLlava16 = {"llava16", "stories260K.gguf", "mmproj-tiny-llava16.gguf", /*mrope=*/false};

TEST(CliVlmLlava16Golden, SquareImageFourTilesAndOverview) { batch2::expect_run_matches_llama_cpp(kLlava16, "vlm_p1"); }

TEST(CliVlmLlava16Golden, WideImageThreeTilesAndOverview) {
  batch2::expect_run_matches_llama_cpp(kLlava16, "vlm_p1_wide");
}

}  // namespace
}  // namespace vlkv
