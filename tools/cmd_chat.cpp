// `vlkv chat`: a conversation in the terminal that keeps its KV cache between turns, as
// llama-mtmd-cli's chat mode (same commands, same turn texts, same answers), plus /kv to
// move the conversation to another KV method and /stats to see what it holds.
// Answers go to stdout, one line each; prompts ("> "), errors and per-turn figures to stderr.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_line.h"
#include "chat/line_reader.h"
#include "answer_printer.h"
#include "commands.h"
#include "hub_flags.h"
#include "kv_flags.h"
#include "media_flags.h"
#include "param_flags.h"
#include "progress_bar.h"
#include "vlkv/conversation.h"
#include "vlkv/engine.h"

namespace vlkv::cli {
namespace {

struct ChatOptions {
  EngineParams engine;
  GenerateParams gen;
  std::string kv_budget = kKvBudgetAuto;  // the one default rule: tools/kv_flags.h
  std::string system_prompt;
  std::vector<std::string> images, videos;  // attached to the first message
  int32_t frames = 0;
  double fps = 0;
  bool no_template = false;
  bool quiet = false;
};

class ChatLoop {
 public:
  ChatLoop(const ChatOptions& o, Engine& e, std::unique_ptr<Conversation> c) : o_(o), engine_(e), chat_(std::move(c)) {}

  // Reads lines until /quit or the end of input; errors in a line are reported and the
  // conversation goes on.
  int run() {
    const bool interactive = isatty(STDIN_FILENO);
    LineReader reader(interactive);
    if (interactive)
      std::fprintf(stderr, "vlkv chat: %s, KV method %s\n%s", engine_.info().name.c_str(), method_name().c_str(),
                   chat_help_text());
    for (const std::string& path : o_.images) attach_image(path);
    for (const std::string& path : o_.videos) attach_video(path);
    while (std::optional<std::string> raw = reader.next()) {
      const ChatLine line = parse_chat_line(*raw);
      if (line.kind == ChatLine::Kind::kQuit) break;
      handle(line);
    }
    return kExitOk;
  }

 private:
  void handle(const ChatLine& line) {
    switch (line.kind) {
      case ChatLine::Kind::kEmpty:
      case ChatLine::Kind::kQuit:
        return;
      case ChatLine::Kind::kBad:
        return (void)report_error(invalid_argument(line.arg));
      case ChatLine::Kind::kHelp:
        std::fputs(chat_help_text(), stderr);
        return;
      case ChatLine::Kind::kImage:
        return attach_image(line.arg);
      case ChatLine::Kind::kVideo:
        return attach_video(line.arg);
      case ChatLine::Kind::kClear:
        pending_.clear();
        if (Status st = chat_->clear(); !st.is_ok()) return (void)report_error(st);
        if (!o_.quiet) std::fprintf(stderr, "vlkv: conversation cleared\n");
        return;
      case ChatLine::Kind::kStats:
        return print_stats();
      case ChatLine::Kind::kKvMethod:
        return switch_method(line.arg);
      case ChatLine::Kind::kSave:
        return save(line.arg);
      case ChatLine::Kind::kLoad:
        return load(line.arg);
      case ChatLine::Kind::kMessage:
        return ask(line.arg);
    }
  }

  void attach_image(const std::string& path) {
    if (!engine_.has_vision()) return (void)report_error(invalid_argument("/image needs a vision model (--mmproj)"));
    Result<Image> img = load_image(path, o_.engine.media_limits);
    if (!img.is_ok()) return (void)report_error(img.status());
    const int w = img->width, h = img->height;
    pending_.push_back(MediaItem{{std::move(img).value()}, false});
    if (!o_.quiet) std::fprintf(stderr, "vlkv: %s (%dx%d) goes with your next message\n", path.c_str(), w, h);
  }

  void attach_video(const std::string& path) {
    if (!engine_.has_vision()) return (void)report_error(invalid_argument("/video needs a vision model (--mmproj)"));
    VideoSampling sampling;
    sampling.n_frames = o_.frames == 0 && o_.fps == 0 ? 8 : o_.frames;
    sampling.fps = o_.fps;
    double rate = 0;
    Result<std::vector<Image>> frames = load_video(path, sampling, o_.engine.media_limits, &rate);
    if (!frames.is_ok()) return (void)report_error(frames.status());
    const size_t n = frames->size();
    pending_.push_back(MediaItem{std::move(frames).value(), true, rate});
    if (!o_.quiet) std::fprintf(stderr, "vlkv: %s (%zu frames) goes with your next message\n", path.c_str(), n);
  }

  void ask(const std::string& message) {
    AnswerPrinter printer(o_.quiet);
    TurnStats st;
    const Status s = chat_->ask(message, std::move(pending_), o_.gen, printer.on_piece(), &st, printer.on_progress());
    pending_.clear();
    printer.end(s.is_ok());
    if (!s.is_ok()) return (void)report_error(s);
    if (st.generation.stopped_at_context)
      std::fprintf(stderr, "vlkv: note: the context is full: the answer stops here; /clear starts over\n");
    if (o_.quiet) return;
    const GenerateStats& g = st.generation;
    const double ttft_ms = 1e3 * (g.encode_seconds + g.prefill_seconds);
    const double dc = g.decode_seconds > 0 && g.n_generated > 1 ? (g.n_generated - 1) / g.decode_seconds : 0;
    std::fprintf(stderr,
                 "vlkv: %lld new prompt tokens (%lld visual), %lld cached from earlier turns | first token after "
                 "%.0f ms | %lld generated, %.1f tok/s | kv %s: held %llu B (%.1f KiB)\n",
                 static_cast<long long>(g.n_prompt_tokens), static_cast<long long>(g.n_visual_tokens),
                 static_cast<long long>(st.n_cached_tokens), ttft_ms, static_cast<long long>(g.n_generated), dc,
                 method_name().c_str(), static_cast<unsigned long long>(chat_->session().kv_held_bytes()),
                 static_cast<double>(chat_->session().kv_held_bytes()) / 1024.0);
  }

  void switch_method(const std::string& method) {
    if (Status st = check_kv_method_flag(method, "/kv"); !st.is_ok()) return (void)report_error(st);
    ProgressBar bar(!o_.quiet && isatty(STDERR_FILENO));
    const Status st =
        chat_->switch_kv_method(method, [&](const char* stage, int64_t done, int64_t total) { bar.update(stage, done, total); });
    bar.finish();
    if (!st.is_ok()) return (void)report_error(check_kv_load_error(st, method, "/kv"));
    if (!o_.quiet) print_stats();
  }

  void save(const std::string& path) {
    if (!pending_.empty())
      return (void)report_error(invalid_argument("/save: attached media wait for a message; send it first"));
    if (Status st = chat_->save(path); !st.is_ok()) return (void)report_error(st);
    if (!o_.quiet)
      std::fprintf(stderr, "vlkv: saved %zu messages, %lld tokens (KV method %s) to %s\n", chat_->turns().size(),
                   static_cast<long long>(chat_->session().n_past()), method_name().c_str(), path.c_str());
  }

  // The file's conversation replaces this one (kept as it was when the file is refused).
  void load(const std::string& path) {
    Result<std::unique_ptr<Conversation>> loaded = Conversation::load(engine_, path, chat_->kv_method());
    if (!loaded.is_ok()) return (void)report_error(loaded.status());
    chat_ = std::move(loaded).value();
    pending_.clear();
    if (!o_.quiet) {
      std::fprintf(stderr, "vlkv: loaded %s\n", path.c_str());
      print_stats();
    }
  }

  void print_stats() const {
    const Session& s = chat_->session();
    const uint64_t held = s.kv_held_bytes();  // the pages it takes: run's, the API's and /metrics' figure
    std::fprintf(stderr, "vlkv: %zu messages, %lld tokens in the cache, KV method %s, held %llu B (%.1f KiB, %.0f B/token)\n",
                 chat_->turns().size(), static_cast<long long>(s.n_past()), method_name().c_str(),
                 static_cast<unsigned long long>(held), static_cast<double>(held) / 1024.0,
                 s.n_past() > 0 ? static_cast<double>(held) / static_cast<double>(s.n_past()) : 0.0);
  }

  std::string method_name() const { return chat_->kv_method().empty() ? o_.engine.kv_method : chat_->kv_method(); }

  const ChatOptions& o_;
  Engine& engine_;
  std::unique_ptr<Conversation> chat_;  // replaced by /load
  std::vector<MediaItem> pending_;  // attached with /image, /video: go with the next message
};

int run(const ChatOptions& o_in) {
  ChatOptions o = o_in;
  if (o.engine.model_path.empty()) return report_error(invalid_argument("--model is required"));
  Result<uint64_t> budget = parse_kv_budget_flag(o.kv_budget);
  if (!budget.is_ok()) return report_error(budget.status());
  o.engine.kv_budget_bytes = *budget;
  if (Status st = check_kv_method_flag(o.engine.kv_method); !st.is_ok()) return report_error(st);
  if (o.frames > 0 && o.fps > 0) return report_error(invalid_argument("give --frames or --fps, not both"));
  Result<std::unique_ptr<Engine>> engine = Engine::load(o.engine);
  if (!engine.is_ok()) return report_error(check_kv_load_error(engine.status(), o.engine.kv_method));
  Engine& e = **engine;
  if (Status st = check_kv_budget_for_model(*budget, o.kv_budget, e.info()); !st.is_ok()) return report_error(st);
  ConversationOptions co;
  co.use_template = !o.no_template;
  co.system_prompt = o.system_prompt;
  Result<std::unique_ptr<Conversation>> chat = Conversation::start(e, co);
  if (!chat.is_ok()) return report_error(chat.status());
  return ChatLoop(o, e, std::move(chat).value()).run();
}

}  // namespace

void add_chat_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<ChatOptions>();
  CLI::App* app = root.add_subcommand(
      "chat", "Talk with a model in the terminal; the KV cache is kept between turns (/help lists the commands)");
  add_param_flags(*app, o->engine, {"model", "mmproj"});
  app->add_option("--system", o->system_prompt, "System prompt, evaluated once at the start (also -sys)");
  app->add_option("--image", o->images, "Image attached to the first message (repeatable; later ones: /image)");
  app->add_option("--video", o->videos, "Video attached to the first message (repeatable; later ones: /video)");
  add_video_sampling_flags(*app, o->frames, o->fps);
  add_param_flags(*app, o->engine, {"max_frames", "max_image_pixels", "image_min_tokens", "image_max_tokens"});
  app->add_option("-n,--n-predict", o->gen.max_tokens, "Most tokens generated per answer")
      ->check(CLI::Range(0, 1 << 24))->capture_default_str();
  add_param_flags(*app, o->gen.sampling);
  add_param_flags(*app, o->engine, {"exact_matmul", "n_threads", "n_ctx", "n_batch"});
  app->add_flag("--no-template", o->no_template, "Feed each message unchanged (no chat template)");
  app->add_flag("-q,--quiet", o->quiet, "No figures or notices on stderr (errors still)");
  add_kv_flags(*app, o->engine.kv_method, o->kv_budget);
  app->footer(std::string("Typed at the prompt:\n") + chat_help_text());
  auto hub = add_hub_flags(*app, o->engine.model_path, o->engine.mmproj_path);
  commands.push_back({app, run_after_hub_download(hub, [o] { return run(*o); })});
}

}  // namespace vlkv::cli
