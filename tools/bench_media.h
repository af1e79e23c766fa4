// `vlkv bench --mmproj M --image F [--video F]`: time to first token of one image (or video)
// question per KV method: the vision encoder + projector, the prefill of the whole prompt
// (text and visual tokens) and their sum, best of the repetitions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vlkv/engine.h"

namespace vlkv::cli {

struct BenchMediaOptions {
  EngineParams engine;                 // model, mmproj, threads, batch, exact_matmul as vlkv run takes them
  std::vector<std::string> methods;    // KV method specs, each its own row
  std::vector<std::string> images;     // image files, in prompt order (then the videos)
  std::vector<std::string> videos;
  int32_t frames = 0;                  // video sampling (as vlkv run: 8 frames when neither is given)
  double fps = 0;
  std::string prompt = "Describe the image.";
  int repetitions = 1;                 // best of (each column on its own)
  bool json = false;
};

// Prints one row (or JSON line) per method; returns the process exit code.
int bench_media(const BenchMediaOptions& o);

}  // namespace vlkv::cli
