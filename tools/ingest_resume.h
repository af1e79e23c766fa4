// `vlkv run`'s side of ingest checkpoints (--checkpoint-every, --checkpoint, --resume; docs/cli.md):
// what identifies an ingest's inputs beyond what the engine checks (the prompt's text, each
// media file's content, the sampling flags), the default interval, and Ctrl-C: the first
// SIGINT during an ingest asks for a checkpoint at the next frame boundary and a stop.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "vlkv/ingest_checkpoint.h"
#include "vlkv/status.h"

namespace vlkv::cli {

// Exit status of an ingest stopped by Ctrl-C after its checkpoint (128 + SIGINT, as a shell's).
constexpr int kExitInterrupted = 130;

// The checkpoint interval when --checkpoint-every is not given: where checkpoints are wanted
// (--save-kv or --checkpoint), for videos of 64 frames or more, every tenth of their frames (at
// least 16: a checkpoint writes the whole cache so far); else none.
int64_t default_checkpoint_every(bool wanted, int64_t n_frames);

// "N bytes, sha256 X" of a file's size and its first and last 64 KiB (the container's header
// and, for MP4s written in one go, its index): cheap at any size, and a re-encoded, cut or
// other file differs. The frames themselves are checked as the ingest resumes.
Result<std::string> media_file_identity(const std::string& path);

// The inputs a run's checkpoint is tied to (IngestInput): the prompt text, the chat template's
// use, each image's and video's file identity, the video sampling.
Result<std::vector<IngestInput>> ingest_inputs(const std::string& prompt, bool use_template,
                                               const std::vector<std::string>& images,
                                               const std::vector<std::string>& videos, int32_t frames, double fps);

// Ctrl-C while armed: a flag (IngestCheckpointing::stop) and a note on stderr, both
// async-signal-safe; a second Ctrl-C, or one after disarm(), ends the process as SIGINT does.
const std::atomic<bool>* arm_interrupt();
void disarm_interrupt();

}  // namespace vlkv::cli
