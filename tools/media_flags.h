// The video sampling flags shared by the commands that read videos (run, chat).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

namespace vlkv::cli {

inline void add_video_sampling_flags(CLI::App& app, int32_t& frames, double& fps) {
  auto* f = app.add_option("--frames", frames, "Frames sampled uniformly from each video (default 8)")
                ->check(CLI::Range(1, 1 << 20));
  auto* r = app.add_option("--fps", fps, "Sample videos at this many frames per second")->check(CLI::PositiveNumber);
  f->excludes(r);
}

}  // namespace vlkv::cli
