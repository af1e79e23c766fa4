// The frame labels an mmproj declares (vlkv.video.frame_label / frame_separator): the bundled
// tinyvideo pair was trained on "0.0 s: <frame>\n0.5 s: <frame>\n...<frame>\nQuestion"; its
// `--video` prompt must be that prompt token for token (the eval set's items spell the labels out
// around one image per frame), counted as it is laid out, streamed as it is read whole.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/video_frame_labels.h"
#include "vlkv/engine.h"
#include "vlkv/media.h"

namespace vlkv {
namespace {

const std::string kModels = std::string(VLKV_SOURCE_DIR) + "/models/";

std::unique_ptr<Engine> load_tinyvideo() {
  EngineParams p;
  p.model_path = kModels + "tinyvideo.gguf";
  p.mmproj_path = kModels + "tinyvideo-mmproj.gguf";
  p.kv_method = "f16";
  p.kv_budget_bytes = 64ull << 20;
  p.n_threads = 2;
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

// The first n frames of the bundled demo clip (sampled at 2 per second).
std::vector<Image> demo_frames(int n) {
  std::vector<Image> frames;
  for (int i = 0; i < n; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "demo/video/v128_0/%03d.png", i);
    Result<Image> img = load_image(kModels + name);
    EXPECT_TRUE(img.is_ok()) << img.status().message();
    if (img.is_ok()) frames.push_back(std::move(img).value());
  }
  return frames;
}

struct Laid {
  std::vector<int32_t> tokens;  // text tokens, -1 per visual token
  std::vector<float> logits;    // after the prompt
};

Laid lay_out_and_eval(Engine& e, const Prompt& prompt) {
  Laid out;
  Result<PreparedPrompt> p = e.prepare_prompt(prompt, true);
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  if (!p.is_ok()) return out;
  for (const PromptChunk& c : p->chunks) {
    if (c.kind == PromptChunk::Kind::kMedia) out.tokens.insert(out.tokens.end(), static_cast<size_t>(c.n_tokens), -1);
    else out.tokens.insert(out.tokens.end(), c.tokens.begin(), c.tokens.end());
  }
  Result<std::unique_ptr<Session>> s = e.new_session();
  EXPECT_TRUE(s.is_ok());
  if (s.is_ok()) {
    Status st = (*s)->eval_prompt(*p, &out.logits);
    EXPECT_TRUE(st.is_ok()) << st.message();
  }
  return out;
}

const char* kQuestion = "What appeared right after the first square?";

// The eval set's layout: the labels typed out, one image item per frame.
Prompt spelled_out(const Engine& e, const std::vector<Image>& frames) {
  std::string text;
  for (size_t i = 0; i < frames.size(); ++i) {
    char label[32];
    std::snprintf(label, sizeof label, "%.1f s: ", static_cast<double>(i) / 2.0);
    text += label + std::string(kMediaMarker) + "\n";
  }
  std::vector<MediaItem> items;
  for (const Image& f : frames) items.push_back(MediaItem(std::vector<Image>{f}));
  return e.user_prompt(text + kQuestion, std::move(items), /*use_template=*/true);
}

TEST(VideoFrameLabels, LabelsFormatAndHostileValuesAreRefused) {
  Result<VideoFrameLabels> l = parse_video_frame_labels("{t} s: ", "\n");
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  EXPECT_EQ(l->label_of(3, 2.0), "1.5 s: ");
  EXPECT_EQ(l->label_of(0, 2.0), "0.0 s: ");
  EXPECT_EQ(l->label_of(7, 0), "7.0 s: ") << "an unknown rate: the index";
  Result<VideoFrameLabels> both = parse_video_frame_labels("[{i}|{t}]", "");
  ASSERT_TRUE(both.is_ok());
  EXPECT_EQ(both->label_of(5, 4.0), "[5|1.2]");  // 1.25 printed with one decimal
  EXPECT_FALSE(parse_video_frame_labels("{x} s: ", "\n").is_ok());
  EXPECT_FALSE(parse_video_frame_labels("{t", "\n").is_ok());
  EXPECT_FALSE(parse_video_frame_labels(std::string("a") + kMediaMarker, "").is_ok());
  EXPECT_FALSE(parse_video_frame_labels("t", std::string(257, 'x')).is_ok());
  EXPECT_FALSE(parse_video_frame_labels(std::string("t\0s", 3), "").is_ok());
}

TEST(VideoFrameLabels, TinyvideosVideoIsTheEvalSetsPromptTokenForToken) {
  std::unique_ptr<Engine> e = load_tinyvideo();
  ASSERT_TRUE(e);
  const std::vector<Image> frames = demo_frames(6);
  ASSERT_EQ(frames.size(), 6u);
  const Laid spelled = lay_out_and_eval(*e, spelled_out(*e, frames));
  const Prompt video_prompt = e->user_prompt(kQuestion, {MediaItem{frames, /*is_video=*/true, /*fps=*/2.0}}, true);
  const Laid video = lay_out_and_eval(*e, video_prompt);
  ASSERT_FALSE(spelled.tokens.empty());
  EXPECT_EQ(video.tokens, spelled.tokens);
  EXPECT_EQ(video.logits, spelled.logits) << "the same tokens and embeddings: the same logits";
  // Counted from the header as it is laid out (requests are admitted on the count).
  MediaInfo info;
  info.width = frames[0].width;
  info.height = frames[0].height;
  info.n_frames = 6;
  info.fps = 2.0;
  info.is_video = true;
  Result<PromptTokenCount> counted = e->count_prompt_tokens(video_prompt.text, {info}, true);
  ASSERT_TRUE(counted.is_ok()) << counted.status().message();
  EXPECT_EQ(counted->n_tokens, static_cast<int64_t>(video.tokens.size()));
  // Without the labels the frames are back to back: fewer tokens, a prompt it never saw.
  const Laid unlabelled = lay_out_and_eval(*e, e->user_prompt(kQuestion, {MediaItem{frames}}, true));
  EXPECT_LT(unlabelled.tokens.size() + 6 * 3, video.tokens.size());
}

TEST(VideoFrameLabels, AStreamedLabelledVideoEqualsTheWholeClip) {
  // The first 8 demo frames as a 2 fps clip (mpeg4: lossy, so the stream is compared with the
  // same clip decoded whole, not with the PNGs).
  const std::string clip = ::testing::TempDir() + "vlkv_labels_" + std::to_string(getpid()) + ".mp4";
  const std::string cmd = "ffmpeg -loglevel error -y -framerate 2 -i " + kModels +
                          "demo/video/v128_0/%03d.png -frames:v 8 -pix_fmt yuv420p -c:v mpeg4 -q:v 2 " + clip +
                          " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "the ffmpeg tool could not make the test clip";
  std::unique_ptr<Engine> e = load_tinyvideo();
  ASSERT_TRUE(e);
  VideoSampling sampling;
  sampling.fps = 2.0;
  double rate = 0;
  Result<std::vector<Image>> frames = load_video(clip, sampling, {}, &rate);
  ASSERT_TRUE(frames.is_ok()) << frames.status().message();
  ASSERT_EQ(frames->size(), 8u);
  EXPECT_DOUBLE_EQ(rate, 2.0);
  const Laid whole = lay_out_and_eval(*e, e->user_prompt(kQuestion, {MediaItem{*frames, true, rate}}, true));
  Result<std::unique_ptr<VideoStream>> stream = VideoStream::open(clip, sampling);
  ASSERT_TRUE(stream.is_ok()) << stream.status().message();
  MediaItem streamed;
  streamed.is_video = true;
  streamed.fps = (*stream)->info().fps;
  streamed.stream = std::move(stream).value();
  const Laid s = lay_out_and_eval(*e, e->user_prompt(kQuestion, {std::move(streamed)}, true));
  EXPECT_EQ(s.tokens, whole.tokens);
  EXPECT_EQ(s.logits, whole.logits);
  // And the labels are there: 8 frames at 2 fps end with "3.5 s: ".
  const Laid spelled = lay_out_and_eval(*e, spelled_out(*e, *frames));
  EXPECT_EQ(whole.tokens, spelled.tokens);
  std::remove(clip.c_str());
}

}  // namespace
}  // namespace vlkv
