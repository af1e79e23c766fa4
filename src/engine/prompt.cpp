// Prompts with media: the text is split at media markers, each text piece is
// tokenized on its own (as libmtmd does: BOS only before the first piece, special
// tokens parsed, and SPM's leading space on every piece), and each media item is
// encoded by the vision model into text pieces (its special tokens) and runs of
// embeddings, in sequence order.
#include <chrono>
#include <string_view>

#include "engine/engine_impl.h"

namespace vlkv {

int64_t PreparedPrompt::n_tokens() const {
  int64_t n = 0;
  for (const PromptChunk& c : chunks) n += c.n_tokens;
  return n;
}

int64_t PreparedPrompt::n_visual_tokens() const {
  int64_t n = 0;
  for (const PromptChunk& c : chunks) n += c.kind == PromptChunk::Kind::kMedia ? c.n_tokens : 0;
  return n;
}

namespace {

std::vector<std::string> split_at_markers(const std::string& text) {
  std::vector<std::string> parts;
  const std::string_view marker = kMediaMarker;
  size_t begin = 0;
  for (;;) {
    const size_t at = text.find(marker, begin);
    if (at == std::string::npos) break;
    parts.push_back(text.substr(begin, at - begin));
    begin = at + marker.size();
  }
  parts.push_back(text.substr(begin));
  return parts;  // n_markers + 1 pieces
}

}  // namespace

Result<PreparedPrompt> Engine::prepare_prompt(const Prompt& prompt, bool add_bos,
                                              const ProgressCallback& progress) const {
  return vlkv::prepare_prompt(*impl_, prompt, add_bos, progress);
}

Result<PreparedPrompt> prepare_prompt(Engine::Impl& e, const Prompt& prompt, bool add_bos,
                                      const ProgressCallback& progress) {
  using Clock = std::chrono::steady_clock;
  if (!prompt.media.empty() && !e.vision) {
    return invalid_argument("this model has no vision encoder: " + std::to_string(prompt.media.size()) +
                            " image/video input(s) given to the text-only model " + e.params.model_path +
                            " (load a multimodal projector with --mmproj)");
  }
  std::string text = prompt.text;
  std::vector<std::string> parts = split_at_markers(text);
  const size_t n_markers = parts.size() - 1;
  if (!e.vision) {
    // A text-only model reads markers as plain text.
    parts = {text};
  } else if (n_markers == 0 && !prompt.media.empty()) {
    for (size_t i = 0; i < prompt.media.size(); ++i) text = kMediaMarker + text;
    parts = split_at_markers(text);
  } else if (n_markers != prompt.media.size()) {
    return invalid_argument("the prompt has " + std::to_string(n_markers) + " media marker(s) " + kMediaMarker +
                            " but " + std::to_string(prompt.media.size()) + " image/video input(s) were given");
  }

  PreparedPrompt out;
  auto add_text = [&](const std::string& piece, bool bos) {
    std::vector<int32_t> ids = e.tokenizer->encode(piece, bos, /*parse_special=*/true);
    if (ids.empty()) return;
    PromptChunk c;
    c.kind = PromptChunk::Kind::kText;
    c.n_tokens = static_cast<int64_t>(ids.size());
    c.tokens = std::move(ids);
    out.chunks.push_back(std::move(c));
  };
  auto t0 = Clock::now();
  const int64_t n_media = static_cast<int64_t>(prompt.media.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    // libmtmd skips empty text pieces except the first, which carries BOS.
    if (!parts[i].empty() || (i == 0 && add_bos)) add_text(parts[i], i == 0 && add_bos);
    if (i + 1 == parts.size()) break;
    const MediaItem& item = prompt.media[i];
    if (item.frames.empty()) return invalid_argument("media input " + std::to_string(i + 1) + " has no frames");
    for (const Image& f : item.frames) {
      if (!f.valid()) return invalid_argument("media input " + std::to_string(i + 1) + " is an empty or broken image");
    }
    Result<MediaEmbedding> emb = [&]() -> Result<MediaEmbedding> {
      std::lock_guard<std::mutex> lock(e.forward_mutex);  // the pool is not re-entrant
      if (!item.is_video) return e.vision->encode_image(item.frames[0], *e.pool);
      return e.vision->encode_video(item.frames, *e.pool, [&](int64_t done, int64_t total) {
        if (progress) progress("encode", done, total);
      });
    }();
    if (!emb.is_ok()) return emb.status().with_context("media input " + std::to_string(i + 1));
    for (MediaPiece& p : emb->pieces) {
      if (p.kind == MediaPiece::Kind::kText) {
        add_text(p.text, false);
        continue;
      }
      PromptChunk c;
      c.kind = PromptChunk::Kind::kMedia;
      c.n_tokens = p.embd.n_tokens;
      c.embeddings = std::move(p.embd.data);
      c.grid_t = p.embd.grid_t;
      c.grid_h = p.embd.grid_h;
      c.grid_w = p.embd.grid_w;
      if (static_cast<int64_t>(c.embeddings.size()) != c.n_tokens * e.hparams.n_embd) {
        return Status(StatusCode::kInternal, "vision model returned embeddings of the wrong size");
      }
      out.chunks.push_back(std::move(c));
    }
    if (progress && !item.is_video) progress("encode", static_cast<int64_t>(i) + 1, n_media);
  }
  out.encode_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

}  // namespace vlkv
