// Prompts with media: the text is split at media markers, each text piece is
// tokenized on its own (as libmtmd does: BOS only before the first piece, special
// tokens parsed, and SPM's leading space on every piece), and each media item is
// encoded by the vision model into text pieces, single vocabulary tokens (its framing
// tokens, looked up by piece) and runs of embeddings, in sequence order. Consecutive
// text lands in one chunk, so the chunk list is libmtmd's.
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

// Consecutive text goes into one chunk, as libmtmd's add_text appends to a text chunk.
void append_text(PreparedPrompt& out, const std::vector<int32_t>& ids) {
  if (ids.empty()) return;
  if (out.chunks.empty() || out.chunks.back().kind != PromptChunk::Kind::kText) {
    out.chunks.emplace_back();
    out.chunks.back().kind = PromptChunk::Kind::kText;
  }
  PromptChunk& c = out.chunks.back();
  c.tokens.insert(c.tokens.end(), ids.begin(), ids.end());
  c.n_tokens = static_cast<int64_t>(c.tokens.size());
}

// libmtmd's mtmd_tokenize with add_special: BOS (if the vocabulary adds one) at the front of
// the first text chunk or as a chunk of its own before media, EOS (likewise) after the last chunk.
void add_bos_and_eos(const Tokenizer& tok, PreparedPrompt& out) {
  const std::vector<int32_t> special = tok.encode("", /*add_special=*/true, /*parse_special=*/false);
  const bool bos = tok.bos() >= 0 && !special.empty() && special.front() == tok.bos();
  const bool eos = tok.eos() >= 0 && special.size() == (bos ? 2u : 1u) && special.back() == tok.eos();
  if (bos) {
    if (out.chunks.empty() || out.chunks.front().kind != PromptChunk::Kind::kText) {
      out.chunks.insert(out.chunks.begin(), PromptChunk{});
    }
    PromptChunk& c = out.chunks.front();
    c.tokens.insert(c.tokens.begin(), tok.bos());
    c.n_tokens = static_cast<int64_t>(c.tokens.size());
  }
  if (eos) append_text(out, {tok.eos()});
}

// "\n" -> "\\n" for error messages.
std::string escape_piece(const std::string& piece) {
  std::string out;
  for (char c : piece) out += c == '\n' ? std::string("\\n") : std::string(1, c);
  return out;
}

}  // namespace

std::string with_media_markers(const std::string& message, size_t n_media) {
  if (n_media == 0 || message.find(kMediaMarker) != std::string::npos) return message;
  std::string text;
  for (size_t i = 0; i < n_media; ++i) text += kMediaMarker;
  return text + message;
}

Prompt Engine::user_prompt(const std::string& message, std::vector<MediaItem> media, bool use_template) const {
  Prompt p;
  p.text = with_media_markers(message, media.size());
  if (use_template) p.text = apply_chat_template(p.text);
  p.media = std::move(media);
  return p;
}

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
  auto add_text = [&](const std::string& piece) {
    append_text(out, e.tokenizer->encode(piece, /*add_special=*/false, /*parse_special=*/true));
  };
  // Media framing tokens named by piece (libmtmd's lookup_token): one vocabulary token each.
  auto add_vocab_tokens = [&](const std::vector<std::string>& pieces) -> Status {
    std::vector<int32_t> ids;
    for (const std::string& p : pieces) {
      const TokenId id = e.tokenizer->find_token_by_piece(p);
      if (id < 0) {
        return invalid_argument("the text model's vocabulary has no single token for '" + escape_piece(p) +
                                "', which the " + std::string(e.vision->projector_type()) +
                                " projector puts around its images (is it the text model of this mmproj?)");
      }
      ids.push_back(id);
    }
    append_text(out, ids);
    return Status::ok();
  };
  auto t0 = Clock::now();
  const int64_t n_media = static_cast<int64_t>(prompt.media.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i].empty()) add_text(parts[i]);  // BOS/EOS come last, as in libmtmd
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
        add_text(p.text);
        continue;
      }
      if (p.kind == MediaPiece::Kind::kVocabTokens) {
        if (Status st = add_vocab_tokens(p.vocab_tokens); !st.is_ok()) {
          return st.with_context("media input " + std::to_string(i + 1));
        }
        continue;
      }
      PromptChunk c;
      c.kind = PromptChunk::Kind::kMedia;
      c.n_tokens = p.embd.n_tokens;
      c.embeddings = std::move(p.embd.data);
      c.grid_t = p.embd.grid_t;
      c.grid_h = p.embd.grid_h;
      c.grid_w = p.embd.grid_w;
      c.t_step = item.is_video ? e.vision->video_t_step(item.fps) : p.embd.t_step;
      if (static_cast<int64_t>(c.embeddings.size()) != c.n_tokens * e.hparams.n_embd_inp()) {
        return Status(StatusCode::kInternal, "vision model returned embeddings of the wrong size");
      }
      out.chunks.push_back(std::move(c));
    }
    if (progress && !item.is_video) progress("encode", static_cast<int64_t>(i) + 1, n_media);
  }
  if (add_bos) add_bos_and_eos(*e.tokenizer, out);
  out.encode_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

}  // namespace vlkv
