// `vlkv run --plan`: what a prompt with videos will cost before any frame is decoded — frames,
// prompt and visual tokens (from the containers' headers), the KV bytes it will hold with the
// chosen method and with f16, whether it fits the context and the KV budget (and the flag that
// makes it fit), and a time estimate from a short calibration on this machine: the encoder on
// the first video's first frame, and prefill speed measured at two depths (attention grows
// with depth), integrated over the prompt's prefill passes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vlkv/engine.h"
#include "vlkv/status.h"

namespace vlkv::cli {

struct IngestPlan {
  int64_t n_frames = 0;          // all videos' sampled frames
  int64_t n_images = 0;
  int64_t n_tokens = 0, n_visual_tokens = 0;
  uint64_t kv_bytes = 0;         // the method's reservation for the prompt + the answer
  uint64_t kv_bytes_f16 = 0;
  uint64_t budget = 0;
  int64_t n_ctx = 0;
  std::string method;
  std::string refusal;           // empty: fits; else why not, with the flag that helps
  // Calibration (0 when not measured).
  double encode_ms_per_frame = 0;
  double prefill_tok_s_shallow = 0, prefill_tok_s_deep = 0;
  int64_t deep_depth = 0;
  double estimate_seconds = 0;   // encoder + prefill, to the first answer token
};

// count: the prompt's tokens from the headers; media: the same items' headers (MediaInfo);
// first_video: the path of the first video (calibrated on its first frame; empty: none).
// n_predict: the answer's room. calibrate: run the short measurements.
Result<IngestPlan> plan_ingest(Engine& e, const PromptTokenCount& count, const std::vector<MediaInfo>& media,
                               const std::string& first_video, const MediaLimits& limits, int64_t n_predict,
                               bool calibrate);

// The plan for a terminal: a few lines.
std::string format_ingest_plan(const IngestPlan& p);

}  // namespace vlkv::cli
