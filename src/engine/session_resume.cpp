// Session::check_resume: a checkpoint loaded by Engine::resume_session against the prompt it is
// to complete. Everything the file says is checked against the prompt before a row is fed: it
// was written by another process and may lie.
#include <string>

#include "engine/decoder_feed.h"
#include "engine/ingest_checkpoint.h"
#include "engine/kv_save.h"
#include "engine/streamed_media.h"

namespace vlkv {

Status Session::check_resume(const PromptLayout& layout, const PreparedPrompt& prompt,
                             StreamedMediaEncoder* streamed) const {
  const IngestCheckpointState& cp = *resume_;
  auto refused = [&](const std::string& why) { return invalid_argument(cp.file + ": " + why); };
  if (!streamed) return refused("the checkpoint is of a streamed video's ingest, this prompt streams none");
  if (cp.n_rows != layout.n_rows() || !(cp.layout == layout_digest(layout)))
    return refused("the checkpoint was made for another prompt (" + std::to_string(cp.n_rows) +
                   " rows; this one lays out " + std::to_string(layout.n_rows()) +
                   (cp.n_rows == layout.n_rows() ? ", differently" : "") + ")");
  // The rows in the cache are the prompt's first ones, and end where a segment does.
  const int64_t first = cp.prompt_first_row;
  const SessionHistory& h = *history_;
  for (int64_t i = 0; i < cp.rows_done; ++i) {
    const size_t at = static_cast<size_t>(first + i);
    if (h.ids[at] != layout.tokens[static_cast<size_t>(i)] ||
        h.kinds[at] != static_cast<uint8_t>(layout.kinds[static_cast<size_t>(i)]) ||
        h.pos[at] != layout.positions[static_cast<size_t>(i)])
      return refused("row " + std::to_string(i) + " of its cache is not the prompt's");
  }
  bool at_boundary = false;
  for (const FeedSegment& sg : layout.segments) at_boundary |= sg.end == cp.rows_done;
  if (!at_boundary) return refused("it stops inside a chunk of the prompt, not between two");
  // Each video: the same plan, the frames in the cache those of the chunks before the cut.
  const std::vector<IngestStreamState> ours = streamed->stream_states();
  if (ours.size() != cp.streams.size())
    return refused("it streamed " + std::to_string(cp.streams.size()) + " video(s), this prompt streams " +
                   std::to_string(ours.size()));
  for (size_t i = 0; i < ours.size(); ++i) {
    const IngestStreamState& a = cp.streams[i];
    const IngestStreamState& b = ours[i];
    const std::string what = "video " + std::to_string(a.media_index + 1) + " ";
    if (a.media_index != b.media_index || a.n_frames != b.n_frames || a.width != b.width || a.height != b.height ||
        a.fps != b.fps)
      return refused(what + "was sampled as " + std::to_string(a.n_frames) + " frames of " + std::to_string(a.width) +
                     "x" + std::to_string(a.height) + " at " + std::to_string(a.fps) + " per second, now as " +
                     std::to_string(b.n_frames) + " of " + std::to_string(b.width) + "x" + std::to_string(b.height) +
                     " at " + std::to_string(b.fps) + " (other --frames, --fps or video?)");
    int64_t chunks_before = 0, per_frame = 0;
    for (const FeedSegment& sg : layout.segments)
      if (sg.media && sg.chunk >= 0 && prompt.chunks[static_cast<size_t>(sg.chunk)].media_index == a.media_index) {
        per_frame += 1;
        if (sg.end <= cp.rows_done) ++chunks_before;
      }
    if (per_frame % a.n_frames != 0) return refused(what + "lays out unevenly over its frames");
    per_frame /= a.n_frames;
    if (chunks_before != a.frames_done * per_frame)
      return refused(what + "has " + std::to_string(a.frames_done) + " frames fed in the checkpoint, its rows cached say otherwise");
  }
  for (const IngestStreamState& a : cp.streams)
    VLKV_RETURN_IF_ERROR(streamed->skip_frames(a.media_index, a.frames_done, a.last_frame_hash).with_context(cp.file));
  return Status::ok();
}

}  // namespace vlkv
