// Checkpoints of a long streamed ingest (vlkv run --checkpoint-every, --resume; docs/cli.md): at
// a frame boundary of a streamed video the KV cache of the prompt rows fed so far is written
// atomically to a KV file with a checkpoint section (docs/kv_file.md), so that an ingest stopped
// part way (a crash, Ctrl-C) continues from there: Engine::resume_session loads it and the next
// Session::eval_prompt / generate of the same prompt feeds only the rest, without decoding or
// encoding the frames before again. The result is the uninterrupted ingest's, bit for bit.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vlkv {

// A named value the caller identifies the ingest's inputs by, beyond what the engine checks
// itself (model, mmproj, KV method, the prompt's tokens and layout, each video's frame plan and
// the last frame it fed, --batch-size, --exact-matmul): e.g. {"video file", "12345 bytes, ..."}.
// A checkpoint whose values differ from the resuming run's is refused, naming the first.
struct IngestInput {
  std::string name, value;
  bool operator==(const IngestInput&) const = default;
};

// One checkpoint written (IngestCheckpointing::on_saved).
struct IngestCheckpointInfo {
  std::string path;
  int64_t frames_done = 0, n_frames = 0;  // streamed frames in the cache, of the prompt's
  int64_t rows_done = 0, n_rows = 0;      // the prompt's rows in the cache, of its rows
  uint64_t file_bytes = 0;
  double seconds = 0;     // building and writing it
  bool stopping = false;  // written because a stop was asked: the prefill stops after it
};

struct IngestCheckpointing {
  std::string path;          // "": no checkpoints
  int64_t every_frames = 0;  // one each time this many more frames are in the cache (0: at a stop only)
  std::vector<IngestInput> inputs;
  // Polled at each frame boundary: once true, a checkpoint is written there and the prefill
  // ends with StatusCode::kCancelled (a SIGINT handler sets it; lock-free, so signal-safe).
  const std::atomic<bool>* stop = nullptr;
  int64_t stop_after_frames = 0;  // > 0: stop so once this many frames are in the cache (tests)
  std::function<void(const IngestCheckpointInfo&)> on_saved;
};

}  // namespace vlkv
