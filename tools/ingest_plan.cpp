#include "ingest_plan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>


namespace vlkv::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Tokens per second of one n-token text pass fed on top of `depth` cached tokens.
Result<double> prefill_rate(Engine& e, int64_t depth, int64_t n) {
  VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, e.new_session());
  if (depth > 0) VLKV_RETURN_IF_ERROR(s->fill_kv_for_benchmark(depth, /*seed=*/7));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  const int64_t n_vocab = s->n_vocab();
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 13) % n_vocab);
  std::vector<float> logits;
  const auto t0 = Clock::now();
  VLKV_RETURN_IF_ERROR(s->eval(ids, false, &logits));
  return static_cast<double>(n) / std::max(seconds_since(t0), 1e-9);
}

Status calibrate(Engine& e, const std::string& first_video, const MediaLimits& limits, IngestPlan& p) {
  if (!first_video.empty()) {
    VideoSampling one;
    one.n_frames = 1;
    VLKV_ASSIGN_OR_RETURN(std::unique_ptr<VideoStream> stream, VideoStream::open(first_video, one, limits));
    VLKV_ASSIGN_OR_RETURN(Image frame, stream->next());
    const auto t0 = Clock::now();
    VLKV_ASSIGN_OR_RETURN(PreparedPrompt pp, e.prepare_prompt(e.user_prompt("", {MediaItem{{std::move(frame)}}}, false), true));
    p.encode_ms_per_frame = 1000.0 * seconds_since(t0);
  }
  // Prefill passes of n_batch rows at a shallow and a deep depth: time per token grows about
  // linearly with depth (attention), so the prompt's passes are integrated along that line.
  const int64_t n = std::min<int64_t>(256, std::max<int64_t>(16, p.n_tokens));
  p.deep_depth = std::min<int64_t>(std::max<int64_t>(p.n_tokens / 2, 1), std::min<int64_t>(8192, p.n_ctx - n));
  VLKV_ASSIGN_OR_RETURN(p.prefill_tok_s_shallow, prefill_rate(e, 0, n));
  if (p.deep_depth > n) {
    VLKV_ASSIGN_OR_RETURN(p.prefill_tok_s_deep, prefill_rate(e, p.deep_depth, n));
  } else {
    p.prefill_tok_s_deep = p.prefill_tok_s_shallow;
    p.deep_depth = 0;
  }
  const double a = 1.0 / p.prefill_tok_s_shallow;  // seconds per token at depth 0
  const double b = p.deep_depth > 0 ? (1.0 / p.prefill_tok_s_deep - a) / static_cast<double>(p.deep_depth) : 0.0;
  // sum over the prompt's tokens of a + b * depth = N a + b N^2 / 2
  const double N = static_cast<double>(p.n_tokens);
  p.estimate_seconds = N * a + std::max(b, 0.0) * N * N / 2 + p.encode_ms_per_frame / 1000.0 * static_cast<double>(p.n_frames + p.n_images);
  return Status::ok();
}

std::string mib(uint64_t bytes) {
  char b[64];
  std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return b;
}

std::string grouped(int64_t v) {
  std::string s = std::to_string(v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

}  // namespace

Result<IngestPlan> plan_ingest(Engine& e, const PromptTokenCount& count, const std::vector<MediaInfo>& media,
                               const std::string& first_video, const MediaLimits& limits, int64_t n_predict,
                               bool calibrate_now) {
  IngestPlan p;
  for (const MediaInfo& m : media) {
    if (m.is_video) p.n_frames += m.n_frames;
    else ++p.n_images;
  }
  p.n_tokens = count.n_tokens;
  p.n_visual_tokens = count.n_visual_tokens;
  p.n_ctx = e.params().n_ctx;
  p.budget = e.params().kv_budget_bytes;
  p.method = e.params().kv_method;
  const int64_t total = p.n_tokens + std::max<int64_t>(n_predict, 0);
  VLKV_ASSIGN_OR_RETURN(p.kv_bytes, e.kv_bytes_for_tokens(total));
  VLKV_ASSIGN_OR_RETURN(p.kv_bytes_f16, e.kv_bytes_for_tokens(total, "f16"));
  const std::string what = std::to_string(p.n_frames) + " frame(s), " + std::to_string(p.n_images) + " image(s): " +
                           std::to_string(p.n_visual_tokens) + " visual tokens";
  // The answer counts in the bytes, not in the fit: one that fills the context is a length stop.
  if (Status st = e.check_prompt_fits(p.n_tokens, 0, "", what); !st.is_ok())
    p.refusal = st.message();
  if (calibrate_now && p.refusal.empty()) VLKV_RETURN_IF_ERROR(calibrate(e, first_video, limits, p));
  return p;
}

std::string format_ingest_plan(const IngestPlan& p) {
  char b[512];
  std::string out;
  std::snprintf(b, sizeof b, "plan: %s frame(s)%s; %s prompt tokens (%s visual), context %s\n", grouped(p.n_frames).c_str(),
                p.n_images ? (" and " + grouped(p.n_images) + " image(s)").c_str() : "", grouped(p.n_tokens).c_str(),
                grouped(p.n_visual_tokens).c_str(), grouped(p.n_ctx).c_str());
  out += b;
  // The reservation admission takes (pages' tails, windows folding): the run holds at most this.
  std::snprintf(b, sizeof b, "  KV with %s: at most %s (%llu B) for the prompt and the answer (f16: %s, %.2fx); budget %s\n",
                p.method.c_str(), mib(p.kv_bytes).c_str(), static_cast<unsigned long long>(p.kv_bytes),
                mib(p.kv_bytes_f16).c_str(),
                p.kv_bytes ? static_cast<double>(p.kv_bytes_f16) / static_cast<double>(p.kv_bytes) : 0.0,
                mib(p.budget).c_str());
  out += b;
  if (!p.refusal.empty()) return out + "  does not fit: " + p.refusal + "\n";
  out += "  fits the context and the KV budget\n";
  if (p.prefill_tok_s_shallow > 0) {
    std::snprintf(b, sizeof b,
                  "  time: encoder %.1f ms/frame; prefill %.0f tok/s at depth 0, %.0f at depth %s: about %.0f s to the "
                  "first answer token\n",
                  p.encode_ms_per_frame, p.prefill_tok_s_shallow, p.prefill_tok_s_deep, grouped(p.deep_depth).c_str(),
                  p.estimate_seconds);
    out += b;
  }
  return out;
}

}  // namespace vlkv::cli
