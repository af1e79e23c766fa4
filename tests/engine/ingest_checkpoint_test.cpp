// Ingest checkpoints (include/vlkv/ingest_checkpoint.h) on the bundled tinyvideo pair and a
// 16-frame 2 fps MPEG-4 clip of the demo's frames (the ffmpeg tool makes it, keyframes every 4
// frames so a resume seeks): a conversation stopped after 8 frames and resumed from its
// checkpoint gives the uninterrupted one's answer and a byte-identical saved file, encoding only
// the 8 frames left; checkpoints of another ingest, and damaged ones, are refused with a line
// that says why; a checkpoint is not a KV file --load-kv or /load take. Exact comparisons: the
// same rows fed in the same passes give the same bits.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "engine/kv_file.h"
#include "vlkv/conversation.h"
#include "vlkv/engine.h"
#include "vlkv/media.h"

namespace vlkv {
namespace {

const std::string kModels = std::string(VLKV_SOURCE_DIR) + "/models/";
const char* kQuestion = "How many times did the square appear?";
constexpr int kFrames = 16;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "vlkv_ingest_" + std::to_string(getpid()) + "_" + name;
}

// The demo's first frames as a 2 fps clip, a keyframe every 4 frames ("" when ffmpeg fails).
std::string make_clip(int n_frames, const std::string& name) {
  const std::string clip = temp_path(name);
  const std::string cmd = "ffmpeg -loglevel error -y -framerate 2 -i " + kModels +
                          "demo/video/v128_0/%03d.png -frames:v " + std::to_string(n_frames) +
                          " -pix_fmt yuv420p -c:v mpeg4 -q:v 2 -g 4 " + clip + " 2>/dev/null";
  return std::system(cmd.c_str()) == 0 ? clip : std::string();
}

std::unique_ptr<Engine> load_tinyvideo(const std::string& kv) {
  EngineParams p;
  p.model_path = kModels + "tinyvideo.gguf";
  p.mmproj_path = kModels + "tinyvideo-mmproj.gguf";
  p.kv_method = kv;
  p.kv_budget_bytes = 64ull << 20;
  p.n_threads = 2;
  p.n_batch = 64;  // several passes per frame's text and rows
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

std::vector<MediaItem> streamed(const std::string& clip) {
  VideoSampling sampling;
  sampling.fps = 2.0;
  Result<std::unique_ptr<VideoStream>> s = VideoStream::open(clip, sampling);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  std::vector<MediaItem> items(1);
  items[0].is_video = true;
  if (!s.is_ok()) return items;
  items[0].fps = (*s)->info().fps;
  items[0].stream = std::move(s).value();
  return items;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

const std::vector<IngestInput> kInputs = {{"video 1 file", "the clip"}, {"video sampling", "--fps 2"}};

struct Turn {
  Status status;
  TurnStats stats;
  std::string saved;  // the conversation's file after the turn
  uint64_t held = 0;
};

Turn ask(Conversation& c, const std::string& clip, const std::string& question, const std::string& save_to) {
  GenerateParams gen;
  gen.max_tokens = 6;
  gen.sampling.temperature = 0;
  Turn t;
  t.status = c.ask(question, streamed(clip), gen, nullptr, &t.stats);
  if (!t.status.is_ok()) return t;
  t.held = c.session().kv_held_bytes();
  EXPECT_TRUE(c.save(save_to).is_ok());
  t.saved = read_file(save_to);
  std::remove(save_to.c_str());
  return t;
}

IngestCheckpointing checkpoints(const std::string& path, int64_t every, int64_t stop_after) {
  IngestCheckpointing cp;
  cp.path = path;
  cp.every_frames = every;
  cp.stop_after_frames = stop_after;
  cp.inputs = kInputs;
  return cp;
}

// Stops after stop_after frames (checkpoints every 4): the checkpoint's path.
std::string interrupted(Engine& e, const std::string& clip, int64_t stop_after, const std::string& name) {
  const std::string cp = temp_path(name);
  Result<std::unique_ptr<Conversation>> c = Conversation::start(e, {"", true, ""});
  EXPECT_TRUE(c.is_ok());
  if (!c.is_ok()) return cp;
  std::vector<IngestCheckpointInfo> saved;
  IngestCheckpointing opts = checkpoints(cp, 4, stop_after);
  opts.on_saved = [&](const IngestCheckpointInfo& i) { saved.push_back(i); };
  (*c)->set_ingest_checkpointing(opts);
  const Turn t = ask(**c, clip, kQuestion, cp + ".kv");
  EXPECT_EQ(t.status.code(), StatusCode::kCancelled) << t.status.message();
  EXPECT_NE(t.status.message().find(cp), std::string::npos) << t.status.message();
  // Every 4 frames, then the stop's own.
  EXPECT_EQ(saved.size(), static_cast<size_t>((stop_after - 1) / 4 + 1));
  if (!saved.empty()) {
    EXPECT_TRUE(saved.back().stopping);
    EXPECT_EQ(saved.back().frames_done, stop_after);
    EXPECT_EQ(saved.back().n_frames, kFrames);
    EXPECT_LT(saved.back().rows_done, saved.back().n_rows);
  }
  return cp;
}

TEST(IngestCheckpoint, ResumedAtHalfIsTheUninterruptedIngestBitForBit) {
  const std::string clip = make_clip(kFrames, "clip.mp4");
  ASSERT_FALSE(clip.empty()) << "the ffmpeg tool could not make the test clip";
  for (const char* kv : {"f16", "kivi2", "vidkv"}) {
    SCOPED_TRACE(kv);
    std::unique_ptr<Engine> e = load_tinyvideo(kv);
    ASSERT_TRUE(e);
    Result<std::unique_ptr<Conversation>> whole = Conversation::start(*e, {"", true, ""});
    ASSERT_TRUE(whole.is_ok());
    const Turn a = ask(**whole, clip, kQuestion, temp_path("whole.kv"));
    ASSERT_TRUE(a.status.is_ok()) << a.status.message();
    EXPECT_EQ(a.stats.generation.n_frames_encoded, kFrames);
    whole->reset();

    for (int64_t stop_after : {8, 5}) {  // at a checkpoint of the interval, and between two
      SCOPED_TRACE(stop_after);
      const std::string cp = interrupted(*e, clip, stop_after, "half.part");
      Result<std::unique_ptr<Conversation>> resumed = Conversation::resume(*e, cp, {"", true, ""}, kInputs);
      ASSERT_TRUE(resumed.is_ok()) << resumed.status().message();
      const int64_t n_resumed = (*resumed)->session().n_resumed();
      EXPECT_GT(n_resumed, 0);
      const Turn b = ask(**resumed, clip, kQuestion, temp_path("resumed.kv"));
      ASSERT_TRUE(b.status.is_ok()) << b.status.message();
      EXPECT_EQ(b.stats.generation.tokens, a.stats.generation.tokens);
      EXPECT_EQ(b.stats.generation.n_prompt_tokens, a.stats.generation.n_prompt_tokens);
      EXPECT_EQ(b.stats.generation.n_cached_tokens, n_resumed);
      EXPECT_EQ(b.stats.generation.n_frames_encoded, kFrames - stop_after) << "the frames before are not encoded again";
      EXPECT_EQ(b.stats.n_cached_tokens, 0) << "no earlier turn";
      EXPECT_EQ(b.held, a.held);
      EXPECT_EQ(b.saved.size(), a.saved.size());
      EXPECT_TRUE(b.saved == a.saved) << "the saved conversations differ";
      std::remove(cp.c_str());
    }
  }
  std::remove(clip.c_str());
}

TEST(IngestCheckpoint, AnotherIngestsOrADamagedCheckpointIsRefused) {
  const std::string clip = make_clip(kFrames, "clip2.mp4");
  const std::string other_clip = make_clip(kFrames - 2, "other.mp4");
  ASSERT_FALSE(clip.empty());
  ASSERT_FALSE(other_clip.empty());
  std::unique_ptr<Engine> e = load_tinyvideo("kivi2");
  ASSERT_TRUE(e);
  const std::string cp = interrupted(*e, clip, 8, "refused.part");
  auto resume_error = [&](const std::string& path, const std::vector<IngestInput>& inputs,
                          const std::string& video, const std::string& question) -> std::string {
    Result<std::unique_ptr<Conversation>> c = Conversation::resume(*e, path, {"", true, ""}, inputs);
    if (!c.is_ok()) return c.status().message();
    const Turn t = ask(**c, video, question, temp_path("x.kv"));
    return t.status.is_ok() ? std::string("(resumed)") : t.status.message();
  };
  // The caller's inputs: the first that differs is named.
  std::vector<IngestInput> other_inputs = kInputs;
  other_inputs[1].value = "--fps 1";
  std::string m = resume_error(cp, other_inputs, clip, kQuestion);
  EXPECT_NE(m.find("another ingest: its video sampling is --fps 2, this run's is --fps 1"), std::string::npos) << m;
  // Another prompt (the same inputs: the engine's own check of the layout).
  m = resume_error(cp, kInputs, clip, "What color was the square at 29.0 s?");
  EXPECT_NE(m.find("made for another prompt"), std::string::npos) << m;
  // Another video of another plan.
  m = resume_error(cp, kInputs, other_clip, kQuestion);
  EXPECT_NE(m.find("another prompt"), std::string::npos) << m;  // 14 frames lay out fewer rows
  // Another KV method.
  {
    std::unique_ptr<Engine> f16 = load_tinyvideo("f16");
    ASSERT_TRUE(f16);
    Result<std::unique_ptr<Conversation>> c = Conversation::resume(*f16, cp, {"", true, ""}, kInputs);
    ASSERT_FALSE(c.is_ok());
    EXPECT_NE(c.status().message().find("it holds KV method kivi"), std::string::npos) << c.status().message();
  }
  // A checkpoint is not a finished file: --load-kv and /load refuse it.
  {
    Result<std::unique_ptr<Conversation>> c = Conversation::load(*e, cp);
    ASSERT_FALSE(c.is_ok());
    EXPECT_NE(c.status().message().find("an ingest checkpoint"), std::string::npos) << c.status().message();
    Result<std::unique_ptr<Session>> s = e->load_session(cp);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.status().message().find("--resume"), std::string::npos) << s.status().message();
  }
  // Damaged: a flipped byte, a cut.
  const std::string bytes = read_file(cp);
  ASSERT_GT(bytes.size(), 1000u);
  const std::string bad = temp_path("bad.part");
  std::string flipped = bytes;
  flipped[flipped.size() - 7] ^= 0x20;
  std::ofstream(bad, std::ios::binary).write(flipped.data(), static_cast<std::streamsize>(flipped.size()));
  m = resume_error(bad, kInputs, clip, kQuestion);
  EXPECT_NE(m.find("bad checksum of section"), std::string::npos) << m;
  std::ofstream(bad, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 3));
  m = resume_error(bad, kInputs, clip, kQuestion);
  EXPECT_NE(m.find("truncated"), std::string::npos) << m;
  // A finished KV file is no checkpoint.
  Result<std::unique_ptr<Conversation>> done = Conversation::resume(*e, cp, {"", true, ""}, kInputs);
  ASSERT_TRUE(done.is_ok()) << done.status().message();
  const Turn t = ask(**done, clip, kQuestion, bad);
  ASSERT_TRUE(t.status.is_ok()) << t.status.message();
  std::ofstream(bad, std::ios::binary | std::ios::trunc).write(t.saved.data(), static_cast<std::streamsize>(t.saved.size()));
  m = resume_error(bad, kInputs, clip, kQuestion);
  EXPECT_NE(m.find("not an ingest checkpoint"), std::string::npos) << m;
  for (const std::string& p : {cp, bad, clip, other_clip}) std::remove(p.c_str());
}

// The checkpoint section rewritten (checksums made right, so only its own checks stand between a
// lying file and the cache): every variant is refused with a line, or, where the lie is harmless
// (an input's bytes), refused for that; nothing crashes or allocates what a count claims.
TEST(IngestCheckpoint, ALyingCheckpointSectionIsRefused) {
  const std::string clip = make_clip(kFrames, "clip3.mp4");
  ASSERT_FALSE(clip.empty());
  std::unique_ptr<Engine> e = load_tinyvideo("kivi2");
  ASSERT_TRUE(e);
  const std::string cp = interrupted(*e, clip, 8, "lying.part");
  const std::string bytes = read_file(cp);
  Result<std::vector<KvFileSectionView>> views =
      parse_kv_file(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  ASSERT_TRUE(views.is_ok()) << views.status().message();
  std::vector<KvFileSection> sections;
  size_t at = 0;
  for (const KvFileSectionView& v : *views) {
    if (v.id == kSectionCheckpoint) at = sections.size();
    sections.push_back({v.id, std::string(reinterpret_cast<const char*>(v.data), v.size)});
  }
  ASSERT_EQ(sections[at].id, kSectionCheckpoint);
  const std::string good = sections[at].bytes;
  const std::string lying = temp_path("lying2.part");
  auto resume_with = [&](const std::string& section) -> Status {
    std::vector<KvFileSection> s = sections;
    s[at].bytes = section;
    const std::string image = build_kv_file(s);
    std::ofstream(lying, std::ios::binary | std::ios::trunc).write(image.data(), static_cast<std::streamsize>(image.size()));
    Result<std::unique_ptr<Conversation>> c = Conversation::resume(*e, lying, {"", true, ""}, kInputs);
    if (!c.is_ok()) return c.status();
    return ask(**c, clip, kQuestion, temp_path("y.kv")).status;
  };
  ASSERT_TRUE(resume_with(good).is_ok()) << "the rewritten file itself resumes";
  auto with_u64 = [&](size_t offset, uint64_t v) {
    std::string b = good;
    std::memcpy(b.data() + offset, &v, sizeof v);
    return b;
  };
  // Layout: version u32 @0, first row @4, rows done @12, rows @20, layout digest @28, n_batch @44,
  // exact @52, threads @53, stream count @57, the stream @65: index @65, frames done @69, frames
  // @77, w @85, h @89, fps @93, hash @101; input count @109.
  uint64_t rows_done = 0;
  std::memcpy(&rows_done, good.data() + 12, sizeof rows_done);
  ASSERT_GT(rows_done, 0u);
  struct Lie {
    std::string bytes, why;
  };
  const std::vector<Lie> lies = {
      {good.substr(0, good.size() - 1), "malformed checkpoint section"},
      {good + "x", "malformed checkpoint section"},
      {with_u64(12, 1), "disagree with the"},                        // rows done vs the cache
      {with_u64(20, rows_done), "disagree with the"},                // no row left to feed
      {with_u64(4, uint64_t{1} << 62), "disagree with the"},         // rows before the prompt
      {with_u64(57, uint64_t{1} << 60), "malformed checkpoint section"},  // a count past the bytes
      {with_u64(69, 17), "out of range"},                            // frames done > frames
      {with_u64(77, uint64_t{1} << 40), "out of range"},             // frames past any plan
      {with_u64(69, 7), "frames fed in the checkpoint"},             // frames done vs the rows
      {with_u64(101, 12345), "not the one the checkpoint fed"},       // another last frame
      {with_u64(28, 1), "another prompt"},                           // the layout digest
      {with_u64(44, 0), "bad engine parameters"},
      {with_u64(109, uint64_t{1} << 40), "malformed checkpoint section"},
  };
  for (const Lie& l : lies) {
    const Status st = resume_with(l.bytes);
    EXPECT_FALSE(st.is_ok()) << l.why;
    EXPECT_NE(st.message().find(l.why), std::string::npos) << st.message();
  }
  // Random flips: refused or (a flip in a value no check reads) resumed, never more.
  uint32_t x = 12345;
  for (int i = 0; i < 60; ++i) {
    std::string b = good;
    x = x * 1664525u + 1013904223u;
    b[(x >> 8) % b.size()] ^= static_cast<char>(1u << (x % 8));
    const Status st = resume_with(b);
    if (!st.is_ok()) {
      EXPECT_NE(st.code(), StatusCode::kInternal) << st.message();
    }
  }
  for (const std::string& p : {cp, lying, clip}) std::remove(p.c_str());
}

}  // namespace
}  // namespace vlkv
