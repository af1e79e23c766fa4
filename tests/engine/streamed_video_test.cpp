// A streamed video (MediaItem::stream: frames decoded and encoded as the prefill reaches
// them) against the same clip decoded whole (load_video): the same prompt tokens, the same
// logits after the prompt (bit for bit: the same embeddings fed in the same passes), the same
// greedy answer and the same KV bytes held, for f16 and for methods that read visual-text
// similarities (vidkv) or compress (kivi2). On tinyvlm-shapes (LLaVA-style: a video is its
// frames' images in turn, streamed one frame at a time) and on a tiny Qwen2.5-VL (frames
// paired into temporal patches: the stream is read whole at prepare time, same result).
// Clips come from the ffmpeg tool (Debian's ffmpeg), as the media loader tests make theirs.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "golden_util.h"
#include "vlkv/engine.h"
#include "vlkv/media.h"
#include "vlkv/scheduler.h"

namespace vlkv {
namespace {

std::string make_clip(int size, int n_frames, const std::string& tag) {
  const std::string path = ::testing::TempDir() + "vlkv_stream_" + tag + "_" + std::to_string(getpid()) + ".mp4";
  const std::string cmd = "ffmpeg -loglevel error -y -f lavfi -i testsrc=size=" + std::to_string(size) + "x" +
                          std::to_string(size) + ":rate=4 -frames:v " + std::to_string(n_frames) +
                          " -pix_fmt yuv420p -c:v mpeg4 -q:v 2 " + path + " 2>/dev/null";
  return std::system(cmd.c_str()) == 0 ? path : std::string();
}

struct Outcome {
  int64_t n_tokens = 0, n_visual = 0, n_past = 0;
  uint64_t held = 0;
  std::vector<float> logits;
  std::vector<int32_t> answer;
};

Outcome run(Engine& e, MediaItem item, int n_answer) {
  Outcome o;
  Result<PreparedPrompt> p =
      e.prepare_prompt(e.user_prompt("What is in the video?", {std::move(item)}, /*use_template=*/true), true);
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  if (!p.is_ok()) return o;
  o.n_tokens = p->n_tokens();
  o.n_visual = p->n_visual_tokens();
  Result<std::unique_ptr<Session>> s = e.new_session();
  EXPECT_TRUE(s.is_ok());
  Status st = (*s)->eval_prompt(*p, &o.logits);
  EXPECT_TRUE(st.is_ok()) << st.message();
  std::vector<float> logits = o.logits;
  for (int i = 0; i < n_answer && st.is_ok(); ++i) {
    int32_t best = 0;
    for (int32_t t = 1; t < static_cast<int32_t>(logits.size()); ++t) best = logits[t] > logits[best] ? t : best;
    o.answer.push_back(best);
    st = (*s)->eval({best}, false, &logits);
  }
  o.n_past = (*s)->n_past();
  o.held = (*s)->kv_held_bytes();
  return o;
}

// The clip opened as a stream of n_frames uniform samples, in a MediaItem (an empty item when
// it cannot be opened: the caller's ASSERT on item.stream fails).
MediaItem streamed_item(const std::string& clip, int n_frames) {
  VideoSampling sampling;
  sampling.n_frames = n_frames;
  Result<std::unique_ptr<VideoStream>> stream = VideoStream::open(clip, sampling);
  EXPECT_TRUE(stream.is_ok()) << stream.status().message();
  MediaItem m;
  m.is_video = true;
  if (!stream.is_ok()) return m;
  m.fps = (*stream)->info().fps;
  m.stream = std::move(stream).value();
  return m;
}

void expect_same(Engine& e, const std::string& clip, int n_frames) {
  VideoSampling sampling;
  sampling.n_frames = n_frames;
  double rate = 0;
  Result<std::vector<Image>> frames = load_video(clip, sampling, {}, &rate);
  ASSERT_TRUE(frames.is_ok()) << frames.status().message();
  const Outcome whole = run(e, MediaItem{std::move(frames).value(), true, rate}, 4);
  MediaItem streamed = streamed_item(clip, n_frames);
  ASSERT_TRUE(streamed.stream);
  EXPECT_DOUBLE_EQ(streamed.fps, rate);
  std::shared_ptr<VideoStream> kept = streamed.stream;
  const Outcome s = run(e, std::move(streamed), 4);
  EXPECT_EQ(kept->n_read(), n_frames) << "every planned frame read, once";
  EXPECT_GT(whole.n_visual, 0);
  EXPECT_EQ(s.n_tokens, whole.n_tokens);
  EXPECT_EQ(s.n_visual, whole.n_visual);
  EXPECT_EQ(s.n_past, whole.n_past);
  EXPECT_EQ(s.held, whole.held);
  EXPECT_EQ(s.answer, whole.answer);
  ASSERT_EQ(s.logits.size(), whole.logits.size());
  EXPECT_EQ(s.logits, whole.logits) << "the same embeddings in the same passes: the same logits";
}

std::unique_ptr<Engine> load(const std::string& model, const std::string& mmproj, const std::string& kv) {
  EngineParams p;
  p.model_path = model;
  p.mmproj_path = mmproj;
  p.kv_method = kv;
  p.kv_budget_bytes = 64ull << 20;
  p.n_threads = 2;
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

// The bundled tinyvlm-shapes pair with KV method kv.
std::unique_ptr<Engine> load_tinyvlm(const std::string& kv) {
  const std::string models = std::string(VLKV_SOURCE_DIR) + "/models/";
  return load(models + "tinyvlm-shapes.gguf", models + "tinyvlm-shapes-mmproj.gguf", kv);
}

TEST(StreamedVideo, LlavaFramesStreamedEqualTheWholeClip) {
  const std::string clip = make_clip(96, 6, "llava");
  ASSERT_FALSE(clip.empty()) << "the ffmpeg tool could not make the test clip";
  for (const char* kv : {"f16", "kivi2", "vidkv"}) {
    SCOPED_TRACE(kv);
    std::unique_ptr<Engine> e = load_tinyvlm(kv);
    ASSERT_TRUE(e);
    expect_same(*e, clip, 3);  // 3 x 144 visual tokens within the 512-token context
  }
  std::remove(clip.c_str());
}

TEST(StreamedVideo, PairedFramesAreReadWholeWithTheSameResult) {
  const std::string clip = make_clip(56, 8, "qwen");
  ASSERT_FALSE(clip.empty()) << "the ffmpeg tool could not make the test clip";
  std::unique_ptr<Engine> e = load(golden::fixtures() + "/models/qwen25vl-tiny-text.gguf",
                                   golden::fixtures() + "/models/mmproj-tiny-qwen25vl.gguf", "f32");
  ASSERT_TRUE(e);
  expect_same(*e, clip, 5);
  std::remove(clip.c_str());
}

TEST(StreamedVideo, AStreamIsReadOnce) {
  const std::string clip = make_clip(96, 4, "once");
  ASSERT_FALSE(clip.empty());
  std::unique_ptr<Engine> e = load_tinyvlm("f16");
  ASSERT_TRUE(e);
  const MediaItem m = streamed_item(clip, 2);
  ASSERT_TRUE(m.stream);
  const Prompt prompt = e->user_prompt("Q", {m}, true);
  Outcome first = run(*e, m, 1);
  EXPECT_GT(first.n_visual, 0);
  Result<PreparedPrompt> again = e->prepare_prompt(prompt, true);
  ASSERT_FALSE(again.is_ok());
  EXPECT_NE(again.status().message().find("read once"), std::string::npos) << again.status().message();
  std::remove(clip.c_str());
}

// The scheduler feeds prepared rows (and may replay a preempted request): a stream, read once
// frame by frame, is refused there with a clear error, not fed unencoded.
TEST(StreamedVideo, TheSchedulerRefusesAStream) {
  const std::string clip = make_clip(96, 4, "sched");
  ASSERT_FALSE(clip.empty());
  std::unique_ptr<Engine> e = load_tinyvlm("f16");
  ASSERT_TRUE(e);
  const MediaItem m = streamed_item(clip, 2);
  ASSERT_TRUE(m.stream);
  Result<PreparedPrompt> p = e->prepare_prompt(e->user_prompt("Q", {m}, true), true);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  auto sched = Scheduler::create(*e);
  ASSERT_TRUE(sched.is_ok());
  Request r;
  r.prepared = std::make_shared<const PreparedPrompt>(std::move(p).value());
  r.generate.max_tokens = 2;
  Result<RequestId> id = (*sched)->submit(r);
  ASSERT_FALSE(id.is_ok());
  EXPECT_NE(id.status().message().find("streamed video"), std::string::npos) << id.status().message();
  std::remove(clip.c_str());
}

}  // namespace
}  // namespace vlkv
