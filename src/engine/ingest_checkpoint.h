// The checkpoint section of a KV file (docs/kv_file.md, id 8): where a streamed prompt's prefill
// stood when the file was written (rows fed, each video's frames fed and the last one's hash)
// and what it must be resumed with (the prompt's layout digest, the engine parameters that
// change its numbers, the caller's inputs). Written by IngestCheckpointer from a prefill's frame
// boundaries; read back as untrusted input (Engine::resume_session). Not public API.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/content_hash.h"
#include "vlkv/engine.h"
#include "vlkv/ingest_checkpoint.h"

namespace vlkv {

struct PromptLayout;

// One streamed video of the prompt at the checkpoint.
struct IngestStreamState {
  int32_t media_index = 0;        // the Prompt's media item
  int64_t frames_done = 0;        // its frames whose rows are all in the cache
  int64_t n_frames = 0;           // its plan's (VideoStream::info)
  int32_t width = 0, height = 0;  // its frames'
  double fps = 0;                 // its plan's sample rate
  uint64_t last_frame_hash = 0;   // frame frames_done - 1's pixels (frame_pixels_hash); 0 when none
};

struct IngestCheckpointState {
  static constexpr uint32_t kVersion = 1;
  int64_t prompt_first_row = 0;  // rows in the cache before the prompt (earlier turns)
  int64_t rows_done = 0;         // the prompt's rows in the cache
  int64_t n_rows = 0;            // the prompt's rows
  Digest128 layout;              // layout_digest of the prompt
  int64_t n_batch = 0;           // EngineParams::n_batch: the forward passes' boundaries
  bool exact_matmul = false;     // EngineParams::exact_matmul: their arithmetic
  int32_t n_threads = 0;         // the pool's threads: some kernels' sums split by them (a note, not a refusal)
  std::vector<IngestStreamState> streams;
  std::vector<IngestInput> inputs;
  std::string file;  // the file it was read from, for messages (not stored)

  int64_t frames_done() const;
  int64_t n_frames() const;
};

// The section's bytes, and back: every count bounded by the bytes left, every value checked
// against the others and against n_past (the rows the file's cache holds).
std::string checkpoint_section(const IngestCheckpointState& s);
Result<IngestCheckpointState> parse_checkpoint_section(const uint8_t* data, size_t size, int64_t n_past);

// SHA-256 of every row of a laid-out prompt (ids, kinds, positions, M-RoPE) and its segments'
// bounds: a resumed prompt must lay out exactly as the checkpointed one did.
Digest128 layout_digest(const PromptLayout& layout);
// 64 bits of a SHA-256 of a frame's size and pixels.
uint64_t frame_pixels_hash(const Image& frame);

// The caller's inputs against the checkpoint's: the first that differs, in a line that names it.
Status check_ingest_inputs(const IngestCheckpointState& saved, const std::vector<IngestInput>& ours);
// The engine parameters that change a prefill's numbers against the checkpoint's.
Status check_ingest_engine(const IngestCheckpointState& saved, const EngineParams& ours);
// "" or the note that another thread count gives a valid result, not the uninterrupted one's bits.
std::string ingest_threads_note(const IngestCheckpointState& saved, int n_threads);

// Writes checkpoints of one eval_prompt's prefill: at a frame boundary, when every_frames more
// frames are in the cache than at the last one, or when a stop is asked (then the prefill ends
// with kCancelled once the file is written).
class IngestCheckpointer {
 public:
  // base: the prompt's fixed fields (first row, rows, layout, engine parameters, inputs).
  IngestCheckpointer(const IngestCheckpointing& options, const Session& session, IngestCheckpointState base,
                     int64_t frames_at_start);
  // After the frame boundary leaving `streams` as given (frames fed so far, theirs) and rows_done.
  Status at_frame_boundary(const std::vector<IngestStreamState>& streams, int64_t rows_done);

 private:
  const IngestCheckpointing& options_;
  const Session& session_;
  IngestCheckpointState state_;
  int64_t frames_at_last_ = 0;  // frames in the cache at the last checkpoint (or at the start)
};

}  // namespace vlkv
