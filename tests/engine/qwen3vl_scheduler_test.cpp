// Qwen3-VL's 384-wide deepstack input rows at load. (Batched Qwen3-VL image requests against
// Session::generate: tests/engine/family_scheduler_test.cpp, with the other families.)
#include <gtest/gtest.h>

#include <string>

#include "vlkv/engine.h"

namespace vlkv {
namespace {

std::string fixture(const std::string& rel) { return std::string(VLKV_TEST_DATA) + "/fixtures/" + rel; }

// A Qwen2-VL projector (128-wide rows) with the Qwen3-VL text model (384-wide input rows) is
// refused at load with the widths named, never run with misread rows.
TEST(Qwen3VlScheduler, MismatchedProjectorIsRefused) {
  EngineParams p;
  p.model_path = fixture("models/qwen3vl-tiny-text.gguf");
  p.mmproj_path = fixture("models/mmproj-tiny-qwen25vl.gguf");
  p.n_threads = 1;
  auto e = Engine::load(p);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("384"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace vlkv
