// `vlkv bench` with media: per KV method, one engine (text model + mmproj) and, per repetition,
// a fresh session that prepares the prompt (tokenize + vision encoder + projector: encode_ms)
// and evaluates it (prefill of every text and visual token: prefill_tok_s); ttft_ms is both,
// the wait before the first token's logits (sampling one token adds microseconds).
#include "bench_media.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "base/cpu_features.h"
#include "commands.h"
#include "kv_flags.h"
#include "bench_json.h"

namespace vlkv::cli {
namespace {

struct MediaRow {
  std::string method;
  int64_t n_prompt_tokens = 0, n_visual_tokens = 0;
  double encode_s = 1e30, prefill_s = 1e30, ttft_s = 1e30;  // best of the repetitions, each on its own
  int threads = 0;
};

Result<std::vector<MediaItem>> load_media(const BenchMediaOptions& o) {
  std::vector<MediaItem> media;
  for (const std::string& path : o.images) {
    VLKV_ASSIGN_OR_RETURN(Image img, load_image(path, o.engine.media_limits));
    media.push_back(MediaItem{{std::move(img)}, false});
  }
  for (const std::string& path : o.videos) {
    VideoSampling sampling;
    sampling.n_frames = o.frames;
    sampling.fps = o.fps;
    double rate = 0;
    VLKV_ASSIGN_OR_RETURN(std::vector<Image> frames, load_video(path, sampling, o.engine.media_limits, &rate));
    media.push_back(MediaItem{std::move(frames), true, rate});
  }
  return media;
}

Result<MediaRow> bench_method(const BenchMediaOptions& o, const std::vector<MediaItem>& media, const std::string& method) {
  using Clock = std::chrono::steady_clock;
  EngineParams ep = o.engine;
  ep.kv_method = method;
  ep.media_cache_bytes = 0;  // every repetition runs the encoder (a cached encode would time a hash lookup)
  Result<std::unique_ptr<Engine>> loaded = Engine::load(ep);
  if (!loaded.is_ok()) return check_kv_load_error(loaded.status(), method);
  Engine& e = **loaded;
  if (!e.has_vision()) return invalid_argument("--image/--video need a vision model (--mmproj)");
  // As vlkv run builds it for a vision model: the chat template around the media and the text.
  const Prompt prompt = e.user_prompt(o.prompt, media, /*use_template=*/true);
  MediaRow row;
  row.method = method;
  row.threads = e.n_threads();
  for (int rep = 0; rep < o.repetitions; ++rep) {
    VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, e.new_session());
    std::vector<float> logits;
    const auto t0 = Clock::now();
    VLKV_ASSIGN_OR_RETURN(PreparedPrompt prepared, e.prepare_prompt(prompt, /*add_bos=*/true));
    if (rep == 0) {  // the context must hold the prompt and the first generated token
      VLKV_RETURN_IF_ERROR(e.check_prompt_fits(prepared.n_tokens(), 1));
    }
    const auto t1 = Clock::now();
    VLKV_RETURN_IF_ERROR(s->eval_prompt(prepared, &logits));
    const auto t2 = Clock::now();
    row.n_prompt_tokens = prepared.n_tokens();
    row.n_visual_tokens = prepared.n_visual_tokens();
    row.encode_s = std::min(row.encode_s, prepared.encode_seconds);
    row.prefill_s = std::min(row.prefill_s, std::chrono::duration<double>(t2 - t1).count());
    row.ttft_s = std::min(row.ttft_s, std::chrono::duration<double>(t2 - t0).count());
  }
  return row;
}

void print_row(const BenchMediaOptions& o, const std::string& model, const std::string& mmproj, const MediaRow& r) {
  const double prefill_tok_s = static_cast<double>(r.n_prompt_tokens) / r.prefill_s;
  if (o.json) {
    nlohmann::json j = {{"model", model},
                        {"mmproj", mmproj},
                        {"method", r.method},
                        {"n_images", o.images.size()},
                        {"n_videos", o.videos.size()},
                        {"n_prompt_tokens", r.n_prompt_tokens},
                        {"n_visual_tokens", r.n_visual_tokens},
                        {"encode_ms", 1e3 * r.encode_s},
                        {"prefill_ms", 1e3 * r.prefill_s},
                        {"prefill_tok_s", prefill_tok_s},
                        {"ttft_ms", 1e3 * r.ttft_s},
                        {"repetitions", o.repetitions}};
    print_bench_json(std::move(j), o.engine, r.method, r.threads);
  } else {
    std::printf("%-24s %-28s %-12s %8lld %8lld %10.1f %12.1f %10.1f\n", model.c_str(), mmproj.c_str(),
                r.method.c_str(), static_cast<long long>(r.n_prompt_tokens), static_cast<long long>(r.n_visual_tokens),
                1e3 * r.encode_s, prefill_tok_s, 1e3 * r.ttft_s);
  }
  std::fflush(stdout);
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

int bench_media(const BenchMediaOptions& o_in) {
  BenchMediaOptions o = o_in;
  if (o.engine.mmproj_path.empty())
    return report_error(invalid_argument("--image/--video need a vision model: pass its --mmproj file"));
  if (o.methods.empty()) return report_error(invalid_argument("no KV methods given"));
  for (const std::string& m : o.methods) {
    if (Status st = check_kv_method_flag(m); !st.is_ok()) return report_error(st);
  }
  if (!o.videos.empty() && o.frames == 0 && o.fps == 0) o.frames = 8;  // vlkv run's default sampling
  // Media are decoded once, before any timing: file decoding is not the encoder's time.
  Result<std::vector<MediaItem>> media = load_media(o);
  if (!media.is_ok()) return report_error(media.status());
  if (!o.json) {
    std::printf("# per method, best of %d: encode ms = vision encoder + projector (and tokenizing the text); "
                "prefill t/s = prompt tokens (text + visual) / prefill seconds; ttft ms = encode + prefill, from "
                "decoded pixels to the first token's logits\n",
                o.repetitions);
    std::printf("# simd: %s (VLKV_SIMD caps it)\n", simd_tier_name(simd_tier()));
    std::printf("%-24s %-28s %-12s %8s %8s %10s %12s %10s\n", "model", "mmproj", "method", "prompt", "visual",
                "encode ms", "prefill t/s", "ttft ms");
  }
  for (const std::string& m : o.methods) {
    Result<MediaRow> row = bench_method(o, *media, m);
    if (!row.is_ok()) return report_error(row.status());
    print_row(o, base_name(o.engine.model_path), base_name(o.engine.mmproj_path), *row);
  }
  return kExitOk;
}

}  // namespace vlkv::cli
