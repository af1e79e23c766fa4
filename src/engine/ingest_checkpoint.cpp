// Ingest checkpoints (ingest_checkpoint.h): the checkpoint section, its checks, the writer, and
// Engine::resume_session.
#include "engine/ingest_checkpoint.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "base/log.h"
#include "engine/decoder_feed.h"
#include "engine/kv_file.h"
#include "engine/kv_save.h"
#include "kv/kv_bytes.h"

namespace vlkv {
namespace {

constexpr uint64_t kMaxStreams = 1 << 16;
constexpr uint64_t kMaxInputs = 256;
constexpr uint64_t kMaxInputBytes = 1 << 16;
constexpr int64_t kMaxRows = int64_t{1} << 40;

}  // namespace

int64_t IngestCheckpointState::frames_done() const {
  int64_t n = 0;
  for (const IngestStreamState& s : streams) n += s.frames_done;
  return n;
}

int64_t IngestCheckpointState::n_frames() const {
  int64_t n = 0;
  for (const IngestStreamState& s : streams) n += s.n_frames;
  return n;
}

std::string checkpoint_section(const IngestCheckpointState& s) {
  std::string b;
  ByteWriter w(&b);
  w.put<uint32_t>(IngestCheckpointState::kVersion);
  w.put<int64_t>(s.prompt_first_row);
  w.put<int64_t>(s.rows_done);
  w.put<int64_t>(s.n_rows);
  w.put<uint64_t>(s.layout.hi);
  w.put<uint64_t>(s.layout.lo);
  w.put<int64_t>(s.n_batch);
  w.put<uint8_t>(s.exact_matmul ? 1 : 0);
  w.put<int32_t>(s.n_threads);
  w.put<uint64_t>(s.streams.size());
  for (const IngestStreamState& v : s.streams) {
    w.put<int32_t>(v.media_index);
    w.put<int64_t>(v.frames_done);
    w.put<int64_t>(v.n_frames);
    w.put<int32_t>(v.width);
    w.put<int32_t>(v.height);
    w.put<double>(v.fps);
    w.put<uint64_t>(v.last_frame_hash);
  }
  w.put<uint64_t>(s.inputs.size());
  for (const IngestInput& in : s.inputs) {
    w.str(in.name);
    w.str(in.value);
  }
  return b;
}

Result<IngestCheckpointState> parse_checkpoint_section(const uint8_t* data, size_t size, int64_t n_past) {
  auto bad = [](const std::string& why) { return invalid_file("malformed checkpoint section: " + why); };
  ByteReader r(data, size);
  const uint32_t version = r.get<uint32_t>();
  if (r.ok() && version != IngestCheckpointState::kVersion)
    return invalid_file("checkpoint section version " + std::to_string(version) + ", this vlkv reads version " +
                        std::to_string(IngestCheckpointState::kVersion));
  IngestCheckpointState s;
  s.prompt_first_row = r.get<int64_t>();
  s.rows_done = r.get<int64_t>();
  s.n_rows = r.get<int64_t>();
  s.layout.hi = r.get<uint64_t>();
  s.layout.lo = r.get<uint64_t>();
  s.n_batch = r.get<int64_t>();
  const uint8_t exact = r.get<uint8_t>();
  s.exact_matmul = exact == 1;
  s.n_threads = r.get<int32_t>();
  const uint64_t n_streams = r.count(kMaxStreams, 44);
  for (uint64_t i = 0; i < n_streams && r.ok(); ++i) {
    IngestStreamState v;
    v.media_index = r.get<int32_t>();
    v.frames_done = r.get<int64_t>();
    v.n_frames = r.get<int64_t>();
    v.width = r.get<int32_t>();
    v.height = r.get<int32_t>();
    v.fps = r.get<double>();
    v.last_frame_hash = r.get<uint64_t>();
    if (!r.ok()) break;
    if (v.media_index < 0 || v.n_frames <= 0 || v.n_frames > kMaxPlannedFrames || v.frames_done < 0 ||
        v.frames_done > v.n_frames || v.width <= 0 || v.height <= 0 || !std::isfinite(v.fps) || v.fps < 0)
      return bad("video " + std::to_string(i + 1) + " has values out of range");
    for (const IngestStreamState& o : s.streams)
      if (o.media_index == v.media_index) return bad("a video appears twice");
    s.streams.push_back(v);
  }
  const uint64_t n_inputs = r.count(kMaxInputs, 16);
  for (uint64_t i = 0; i < n_inputs && r.ok(); ++i) {
    IngestInput in;
    in.name = r.str(kMaxInputBytes);
    in.value = r.str(kMaxInputBytes);
    s.inputs.push_back(std::move(in));
  }
  if (!r.ok() || !r.at_end()) return bad("its sizes disagree with its bytes");
  if (exact > 1 || s.n_batch < 1 || s.n_batch > (1 << 20) || s.n_threads < 1 || s.n_threads > 1024)
    return bad("bad engine parameters");
  // Rows are left to feed (the last one's logits start the answer).
  if (s.prompt_first_row < 0 || s.rows_done <= 0 || s.n_rows <= 0 || s.n_rows > kMaxRows || s.rows_done >= s.n_rows ||
      s.prompt_first_row + s.rows_done != n_past)
    return bad("its rows (" + std::to_string(s.prompt_first_row) + " before the prompt, " +
               std::to_string(s.rows_done) + " of " + std::to_string(s.n_rows) + " of it) disagree with the " +
               std::to_string(n_past) + " the cache holds");
  if (s.streams.empty()) return bad("no streamed video");
  return s;
}

Digest128 layout_digest(const PromptLayout& layout) {
  Sha256 h;
  h.update_string("vlkv ingest layout v1");
  h.update_value(static_cast<uint64_t>(layout.n_rows()));
  h.update(layout.tokens.data(), layout.tokens.size() * sizeof(int32_t));
  h.update(layout.positions.data(), layout.positions.size() * sizeof(int64_t));
  h.update(layout.kinds.data(), layout.kinds.size() * sizeof(TokenKind));
  h.update_value(layout.next_pos);
  h.update_value(static_cast<uint64_t>(layout.segments.size()));
  for (const FeedSegment& sg : layout.segments) {
    h.update_value(sg.begin);
    h.update_value(sg.end);
    h.update_value(static_cast<uint8_t>(sg.media));
    h.update_value(static_cast<uint8_t>(sg.non_causal));
    h.update_value(static_cast<uint64_t>(sg.mrope.size()));
    h.update(sg.mrope.data(), sg.mrope.size() * sizeof(int64_t));
  }
  return h.finish128();
}

uint64_t frame_pixels_hash(const Image& frame) {
  Sha256 h;
  h.update_string("vlkv frame v1");
  h.update_value(frame.width);
  h.update_value(frame.height);
  h.update(frame.pixels.data(), frame.pixels.size());
  return h.finish128().hi;
}

Status check_ingest_inputs(const IngestCheckpointState& saved, const std::vector<IngestInput>& ours) {
  auto value_in = [](const std::vector<IngestInput>& list, const std::string& name) -> std::string {
    for (const IngestInput& in : list)
      if (in.name == name) return in.value;
    return "(none)";
  };
  for (const IngestInput& in : ours) {
    const std::string theirs = value_in(saved.inputs, in.name);
    if (theirs != in.value)
      return invalid_argument("it belongs to another ingest: its " + in.name + " is " + theirs + ", this run's is " +
                              in.value);
  }
  for (const IngestInput& in : saved.inputs)
    if (value_in(ours, in.name) == "(none)")
      return invalid_argument("it belongs to another ingest: its " + in.name + " is " + in.value +
                              ", this run has none");
  return Status::ok();
}

Status check_ingest_engine(const IngestCheckpointState& saved, const EngineParams& ours) {
  if (saved.n_batch != ours.n_batch)
    return invalid_argument("it was made with --batch-size " + std::to_string(saved.n_batch) + ", this run has " +
                            std::to_string(ours.n_batch) + " (the forward passes would differ)");
  if (saved.exact_matmul != ours.exact_matmul)
    return invalid_argument(std::string("it was made ") + (saved.exact_matmul ? "with" : "without") +
                            " --exact-matmul, this run " + (ours.exact_matmul ? "has it" : "has not"));
  return Status::ok();
}

std::string ingest_threads_note(const IngestCheckpointState& saved, int n_threads) {
  if (saved.n_threads == n_threads) return "";
  return "the checkpoint was made with " + std::to_string(saved.n_threads) + " threads, this run has " +
         std::to_string(n_threads) + ": the answer is as good, but not bit for bit the uninterrupted run's "
         "(some sums split by thread; -t " + std::to_string(saved.n_threads) + " gives those)";
}

IngestCheckpointer::IngestCheckpointer(const IngestCheckpointing& options, const Session& session,
                                       IngestCheckpointState base, int64_t frames_at_start)
    : options_(options), session_(session), state_(std::move(base)), frames_at_last_(frames_at_start) {}

Status IngestCheckpointer::at_frame_boundary(const std::vector<IngestStreamState>& streams, int64_t rows_done) {
  state_.streams = streams;
  state_.rows_done = rows_done;
  const int64_t frames = state_.frames_done();
  const bool stopping = (options_.stop && options_.stop->load(std::memory_order_relaxed)) ||
                        (options_.stop_after_frames > 0 && frames >= options_.stop_after_frames);
  const bool due = options_.every_frames > 0 && frames - frames_at_last_ >= options_.every_frames &&
                   frames < state_.n_frames();  // the last frame: the prompt's end is near, the file follows
  // The prompt's last row fed: nothing left to resume, the answer comes next.
  if ((!stopping && !due) || rows_done >= state_.n_rows) return Status::ok();
  const auto t0 = std::chrono::steady_clock::now();
  const std::string section = checkpoint_section(state_);
  Result<uint64_t> written = SessionFile::write(session_, nullptr, options_.path, &section);
  if (!written.is_ok()) return written.status().with_context("writing a checkpoint to " + options_.path);
  frames_at_last_ = frames;
  IngestCheckpointInfo info;
  info.path = options_.path;
  info.frames_done = frames;
  info.n_frames = state_.n_frames();
  info.rows_done = rows_done;
  info.n_rows = state_.n_rows;
  info.file_bytes = *written;
  info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  info.stopping = stopping;
  if (options_.on_saved) options_.on_saved(info);
  if (!stopping) return Status::ok();
  return Status(StatusCode::kCancelled, "stopped at frame " + std::to_string(frames) + " of " +
                                            std::to_string(state_.n_frames()) + ": the prompt's first " +
                                            std::to_string(rows_done) + " rows are in the checkpoint " +
                                            options_.path);
}

Result<std::unique_ptr<Session>> Engine::resume_session(const std::string& path, const std::string& kv_method,
                                                        const std::vector<IngestInput>& inputs) {
  Engine::Impl& e = *impl_;
  VLKV_ASSIGN_OR_RETURN(std::vector<uint8_t> data, read_kv_file(path, SessionFile::max_file_bytes(e)));
  auto refused = [&](const Status& st) { return Status(st.code(), path + ": " + st.message()); };
  std::string section;
  Result<std::unique_ptr<Session>> s = SessionFile::load(e, data.data(), data.size(), kv_method, nullptr, &section);
  if (!s.is_ok()) return refused(s.status());
  if (section.empty())
    return refused(invalid_argument("not an ingest checkpoint (a finished KV file: ask about it with --load-kv)"));
  Result<IngestCheckpointState> state = parse_checkpoint_section(reinterpret_cast<const uint8_t*>(section.data()),
                                                                 section.size(), (*s)->n_past());
  if (!state.is_ok()) return refused(state.status());
  if (Status st = check_ingest_inputs(*state, inputs); !st.is_ok()) return refused(st);
  if (Status st = check_ingest_engine(*state, e.params); !st.is_ok()) return refused(st);
  if (const std::string note = ingest_threads_note(*state, n_threads()); !note.empty())
    VLKV_LOG_WARN("vlkv: note: %s: %s", path.c_str(), note.c_str());
  state->file = path;
  (*s)->resume_ = std::make_unique<IngestCheckpointState>(std::move(state).value());
  return s;
}

}  // namespace vlkv
