// Prompts with media: the text is split at media markers, each text piece is
// tokenized on its own (as libmtmd does: BOS only before the first piece, special
// tokens parsed, and SPM's leading space on every piece; but within Prompt::plain_spans,
// text a client typed, neither special tokens nor markers are recognised), and each media item is
// encoded by the vision model into text pieces, single vocabulary tokens (its framing
// tokens, looked up by piece) and runs of embeddings, in sequence order. Consecutive
// text lands in one chunk, so the chunk list is libmtmd's, except that a conversation's
// text is also cut after each earlier assistant opening (same tokens, one more chunk each;
// docs/prefix_cache.md).
#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <string_view>

#include "engine/engine_impl.h"
#include "engine/kv_save.h"
#include "engine/media_cache.h"

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

using Spans = std::vector<std::pair<size_t, size_t>>;

bool overlaps(const Spans& plain, size_t at, size_t n) {
  for (const auto& [b, e] : plain)
    if (at < e && at + n > b) return true;
  return false;
}

// A piece of a prompt's text between media markers, and where it starts in the text.
struct TextPart {
  std::string text;
  size_t offset = 0;
};

// The text cut at each marker outside plain (a typed marker is text).
std::vector<TextPart> split_at_markers(const std::string& text, const Spans& plain) {
  std::vector<TextPart> parts;
  const std::string_view marker = kMediaMarker;
  size_t begin = 0, from = 0;
  for (;;) {
    const size_t at = text.find(marker, from);
    if (at == std::string::npos) break;
    from = at + 1;
    if (overlaps(plain, at, marker.size())) continue;
    parts.push_back({text.substr(begin, at - begin), begin});
    begin = from = at + marker.size();
  }
  parts.push_back({text.substr(begin), begin});
  return parts;  // n_markers + 1 pieces
}

// plain's ranges within [offset, offset + n), relative to offset.
Spans spans_within(const Spans& plain, size_t offset, size_t n) {
  Spans out;
  for (const auto& [b, e] : plain) {
    const size_t lo = std::max(b, offset), hi = std::min(e, offset + n);
    if (lo < hi) out.emplace_back(lo - offset, hi - offset);
  }
  return out;
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
// Whether it appended EOS.
bool add_bos_and_eos(const Tokenizer& tok, PreparedPrompt& out) {
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
  return eos;
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

Result<PreparedPrompt> Engine::prepare_prompt_unencoded(const Prompt& prompt, bool add_bos) const {
  return vlkv::prepare_prompt(*impl_, prompt, add_bos, {}, /*encode_media=*/false);
}

int64_t Engine::media_encodes() const { return impl_->n_media_encodes.load(); }

namespace {

// One media item's pieces for assemble(): encoded (with embeddings, each run's t_step set) or
// laid out (no embeddings: counting).
using MediaPieces = std::function<Result<MediaEmbedding>(size_t index)>;

// A media item's frame count and rate, where it is a video (n_frames 0: an image): where its
// frames' labels go (Engine::Impl::video_frame_labels).
struct VideoFrames {
  int64_t n_frames = 0;
  double fps = 0;
};

// prepare_prompt and count_prompt_tokens in one: the text split at markers and tokenized piece
// by piece, each item's pieces in its place, BOS/EOS last. with_data: the runs carry
// embeddings (checked against n_embd_inp); else only their token counts.
// digests (may be null): item i's content digest, once media_pieces(i) has returned; each of
// its embedding runs gets media_piece_digest(digest, run index).
// plain: Prompt::plain_spans of prompt_text. streamed (may be null): items whose runs have
// no embeddings even with_data (MediaItem::stream, encoded as they are fed). videos: each item's
// frames, for the mmproj's frame labels: label 0 ends the text before the video, the separator
// and the next label are a text piece between frames, the last separator starts the text after
// it - the tokens of a prompt that spells them out around one image per frame.
Result<PreparedPrompt> assemble(Engine::Impl& e, const std::string& prompt_text, size_t n_media,
                                const MediaPieces& media_pieces, bool with_data, bool add_bos, const Spans& plain_in,
                                const std::vector<VideoFrames>& videos, const std::vector<Digest128>* digests = nullptr,
                                const std::vector<bool>* streamed = nullptr) {
  if (n_media > 0 && !e.vision) {
    return invalid_argument("this model has no vision encoder: " + std::to_string(n_media) +
                            " image/video input(s) given to the text-only model " + e.params.model_path +
                            " (load a multimodal projector with --mmproj)");
  }
  std::string text = prompt_text;
  Spans plain = plain_in;
  std::vector<TextPart> parts = split_at_markers(text, plain);
  const size_t n_markers = parts.size() - 1;
  if (!e.vision) {
    // A text-only model reads markers as plain text.
    parts = {{text, 0}};
  } else if (n_markers == 0 && n_media > 0) {
    const std::string_view marker = kMediaMarker;
    for (size_t i = 0; i < n_media; ++i) text = kMediaMarker + text;
    for (auto& [b, en] : plain) {
      b += n_media * marker.size();
      en += n_media * marker.size();
    }
    parts = split_at_markers(text, plain);
  } else if (n_markers != n_media) {
    return invalid_argument("the prompt has " + std::to_string(n_markers) + " media marker(s) " + kMediaMarker +
                            " but " + std::to_string(n_media) + " image/video input(s) were given");
  }

  PreparedPrompt out;
  // Text tokenized as one piece: `lead` bytes of frame-label text, then the prompt's text at
  // offset (special tokens parsed but in plain spans), then label text up to the piece's end.
  struct Piece {
    std::string text;
    size_t offset = 0, lead = 0, body = 0;
  };
  auto encode = [&](const Piece& p, size_t n) {  // its first n bytes
    Spans local = spans_within(plain, p.offset, std::min(p.body, n > p.lead ? n - p.lead : 0));
    for (auto& [b, en] : local) b += p.lead, en += p.lead;
    return e.tokenizer->encode(p.text.substr(0, n), /*add_special=*/false, /*parse_special=*/true, local);
  };
  auto add_text = [&](const std::string& piece) { append_text(out, e.tokenizer->encode(piece, false, true)); };
  // A conversation's earlier turns: the prompt's text is cut into chunks right after each
  // assistant opening but a last one (a forward pass never crosses a chunk), where the text up
  // to there tokenizes to the first tokens of the whole piece. Turn N's prompt ends at such a
  // point, so turn N+1 feeds the same passes up to it and the prefix cache reuses turn N's
  // prompt exactly (docs/prefix_cache.md). Tokens are unchanged; a one-turn prompt has no cut.
  const std::string opening = assistant_opening(e.chat_template);
  auto add_prompt_text = [&](const Piece& p) {
    const std::string& piece = p.text;
    const std::vector<int32_t> ids = encode(p, piece.size());
    size_t from = 0;
    for (size_t at = opening.empty() ? std::string::npos : piece.find(opening); at != std::string::npos;
         at = piece.find(opening, at + opening.size())) {
      const size_t end = at + opening.size();
      if (end == piece.size()) break;
      const std::vector<int32_t> head = encode(p, end);
      if (head.size() <= from || head.size() >= ids.size() || !std::equal(head.begin(), head.end(), ids.begin())) continue;
      append_text(out, std::vector<int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(from), ids.begin() + static_cast<std::ptrdiff_t>(head.size())));
      out.chunks.emplace_back();  // the next text starts a chunk of its own
      from = head.size();
    }
    append_text(out, std::vector<int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(from), ids.end()));
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
  const VideoFrameLabels* labels = e.video_frame_labels ? &*e.video_frame_labels : nullptr;
  std::string carried;  // the last separator of a labelled video: the next text begins with it
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool labelled = labels && i + 1 < parts.size() && i < videos.size() && videos[i].n_frames > 0;
    Piece part{carried + parts[i].text, parts[i].offset, carried.size(), parts[i].text.size()};
    if (labelled) part.text += labels->label_of(0, videos[i].fps);
    carried.clear();
    if (!part.text.empty()) add_prompt_text(part);  // BOS/EOS come last, as in libmtmd
    if (i + 1 == parts.size()) break;
    Result<MediaEmbedding> emb = media_pieces(i);
    if (!emb.is_ok()) return emb.status().with_context("media input " + std::to_string(i + 1));
    const size_t n_pieces = emb->pieces.size();
    const size_t per_frame = labelled ? n_pieces / static_cast<size_t>(videos[i].n_frames) : 0;
    if (labelled && (per_frame == 0 || per_frame * static_cast<size_t>(videos[i].n_frames) != n_pieces)) {
      return Status(StatusCode::kInternal, "media input " + std::to_string(i + 1) + ": " + std::to_string(n_pieces) +
                                               " pieces for " + std::to_string(videos[i].n_frames) + " labelled frames");
    }
    size_t run = 0;
    for (size_t k = 0; k < n_pieces; ++k) {
      MediaPiece& p = emb->pieces[k];
      if (labelled && k > 0 && k % per_frame == 0)
        add_text(labels->separator + labels->label_of(static_cast<int64_t>(k / per_frame), videos[i].fps));
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
      c.t_step = p.embd.t_step;
      c.media_index = static_cast<int32_t>(i);
      if (digests && i < digests->size() && !(*digests)[i].is_zero()) {
        const Digest128 d = media_piece_digest((*digests)[i], run);
        c.content_hi = d.hi;
        c.content_lo = d.lo;
      }
      ++run;
      const bool unencoded = streamed && i < streamed->size() && (*streamed)[i];
      if (with_data && !unencoded && static_cast<int64_t>(c.embeddings.size()) != c.n_tokens * e.hparams.n_embd_inp()) {
        return Status(StatusCode::kInternal, "vision model returned embeddings of the wrong size");
      }
      out.chunks.push_back(std::move(c));
    }
    if (labelled) carried = labels->separator;
  }
  out.ends_at_turn = !opening.empty() && text.ends_with(opening);
  if (add_bos && add_bos_and_eos(*e.tokenizer, out)) out.ends_at_turn = false;
  return out;
}

// The layout of one item from its size and frame count (no pixels).
Result<MediaEmbedding> layout_media(const VisionModel& vision, int32_t width, int32_t height, int64_t n_frames,
                                    bool is_video) {
  if (!is_video) return vision.layout_image(width, height);
  return vision.layout_video(n_frames, width, height);
}

// A streamed video whose family encodes frames together (Qwen2-VL's temporal pairs) cannot be
// encoded frame by frame: its frames are read whole into a copy of the prompt.
Result<std::optional<Prompt>> read_unstreamable(const Engine::Impl& e, const Prompt& prompt) {
  bool any = false;
  for (const MediaItem& m : prompt.media) any |= m.stream != nullptr;
  if (!any || !e.vision || e.vision->video_frames_independent()) return std::optional<Prompt>();
  Prompt copy = prompt;
  for (MediaItem& m : copy.media) {
    if (!m.stream) continue;
    const int64_t n = m.stream->info().n_frames;
    if (m.stream->n_read() != 0) return invalid_argument("a streamed video was already fed (a stream is read once)");
    for (int64_t f = 0; f < n; ++f) {
      VLKV_ASSIGN_OR_RETURN(Image img, m.stream->next());
      m.frames.push_back(std::move(img));
    }
    m.stream.reset();
  }
  return std::optional<Prompt>(std::move(copy));
}

}  // namespace

Result<PreparedPrompt> prepare_prompt(Engine::Impl& e, const Prompt& prompt_in, bool add_bos,
                                      const ProgressCallback& progress, bool encode_media) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  VLKV_ASSIGN_OR_RETURN(std::optional<Prompt> read_whole, read_unstreamable(e, prompt_in));
  const Prompt& prompt = read_whole ? *read_whole : prompt_in;
  const int64_t n_media = static_cast<int64_t>(prompt.media.size());
  std::vector<bool> streamed(prompt.media.size());
  for (size_t i = 0; i < streamed.size(); ++i) streamed[i] = prompt.media[i].stream != nullptr;
  // Each item's pixels hashed once: the encoder and prefix caches key by media_digest, KV files
  // record the content digest's first 64 bits.
  std::vector<Digest128> contents(prompt.media.size()), digests(prompt.media.size());
  const Digest128 salt = cache_salt_digest(prompt.cache_salt);
  for (size_t i = 0; i < contents.size(); ++i)
    if (!streamed[i]) contents[i] = media_content_digest(prompt.media[i]);  // a stream's pixels come later
  auto encode = [&](size_t i) -> Result<MediaEmbedding> {
    const MediaItem& item = prompt.media[i];
    if (item.stream) {  // laid out now from the container's plan, encoded as it is fed
      const MediaInfo& info = item.stream->info();
      if (item.stream->n_read() != 0) return invalid_argument("a streamed video was already fed (a stream is read once)");
      VLKV_ASSIGN_OR_RETURN(MediaEmbedding layout, layout_media(*e.vision, info.width, info.height, info.n_frames, true));
      const double t_step = e.vision->video_t_step(item.fps);
      for (MediaPiece& p : layout.pieces) p.embd.t_step = t_step;
      return layout;
    }
    if (item.frames.empty()) return invalid_argument("media input " + std::to_string(i + 1) + " has no frames");
    for (const Image& f : item.frames) {
      if (!f.valid()) return invalid_argument("media input " + std::to_string(i + 1) + " is an empty or broken image");
    }
    const Image& first = item.frames[0];
    // A media item seen before (the same pixels and preprocessing) is not encoded again.
    const double t_step = item.is_video ? e.vision->video_t_step(item.fps) : 1.0;
    digests[i] = salted_digest(media_digest(e.media_id, contents[i], t_step), salt);
    if (e.media_cache) {
      if (std::optional<MediaEmbedding> kept = e.media_cache->find(digests[i])) {
        if (progress && !item.is_video) progress("encode", static_cast<int64_t>(i) + 1, n_media);
        return std::move(*kept);
      }
    }
    // What count_prompt_tokens says for this item: the encoding must agree with it, since
    // requests are admitted or refused on the count before their media are decoded.
    VLKV_ASSIGN_OR_RETURN(MediaEmbedding layout, layout_media(*e.vision, first.width, first.height,
                                                              static_cast<int64_t>(item.frames.size()), item.is_video));
    if (!encode_media) {  // the layout alone: its runs have token counts and grids, no embeddings
      for (MediaPiece& p : layout.pieces) p.embd.t_step = t_step;
      return layout;
    }
    ++e.n_media_encodes;
    Result<MediaEmbedding> emb = [&]() -> Result<MediaEmbedding> {
      std::lock_guard<std::mutex> lock(e.forward_mutex);  // the pool is not re-entrant
      if (!item.is_video) return e.vision->encode_image(first, *e.pool);
      return e.vision->encode_video(item.frames, *e.pool, [&](int64_t done, int64_t total) {
        if (progress) progress("encode", done, total);
      });
    }();
    if (!emb.is_ok()) return emb;
    if (emb->pieces.size() != layout.pieces.size() || emb->n_visual_tokens() != layout.n_visual_tokens()) {
      for (const Image& f : item.frames) {
        if (f.width != first.width || f.height != first.height) {  // load_video never makes such a video
          return invalid_argument("media input " + std::to_string(i + 1) + ": the frames of one video differ in size (" +
                                  std::to_string(first.width) + "x" + std::to_string(first.height) + " and " +
                                  std::to_string(f.width) + "x" + std::to_string(f.height) +
                                  "): its token count would not follow from its size");
        }
      }
      return Status(StatusCode::kInternal, std::string(e.vision->projector_type()) + ": the encoder made " +
                                               std::to_string(emb->n_visual_tokens()) + " visual tokens where its layout says " +
                                               std::to_string(layout.n_visual_tokens()));
    }
    if (item.is_video) {
      for (MediaPiece& p : emb->pieces) p.embd.t_step = t_step;
    }
    if (e.media_cache) e.media_cache->insert(digests[i], *emb);
    if (progress && !item.is_video) progress("encode", static_cast<int64_t>(i) + 1, n_media);
    return emb;
  };
  std::vector<VideoFrames> videos(prompt.media.size());
  for (size_t i = 0; i < videos.size(); ++i) {
    const MediaItem& m = prompt.media[i];
    if (m.stream) videos[i] = {m.stream->info().n_frames, m.fps > 0 ? m.fps : m.stream->info().fps};
    else if (m.is_video) videos[i] = {static_cast<int64_t>(m.frames.size()), m.fps};
  }
  VLKV_ASSIGN_OR_RETURN(PreparedPrompt out, assemble(e, prompt.text, prompt.media.size(), encode,
                                                     /*with_data=*/encode_media, add_bos, prompt.plain_spans, videos,
                                                     &digests, &streamed));
  out.streams.resize(prompt.media.size());
  for (size_t i = 0; i < prompt.media.size(); ++i) out.streams[i] = prompt.media[i].stream;
  for (PromptChunk& c : out.chunks)
    if (c.kind == PromptChunk::Kind::kMedia && c.media_index >= 0 && static_cast<size_t>(c.media_index) < contents.size())
      c.media_hash = media_content_hash(contents[static_cast<size_t>(c.media_index)]);
  out.salt_hi = salt.hi;
  out.salt_lo = salt.lo;
  out.encode_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

Result<PromptTokenCount> Engine::count_prompt_tokens(const std::string& text, const std::vector<MediaInfo>& media,
                                                     bool add_bos, const Spans& plain_spans) const {
  Engine::Impl& e = *impl_;
  auto layout = [&](size_t i) -> Result<MediaEmbedding> {
    const MediaInfo& m = media[i];
    // (assemble names the item: "media input N: ...")
    if (m.is_video && m.n_frames <= 0) return invalid_argument("the video has no frames");
    // Refused before a layout of that many frames is built: --max-frames, or else the context
    // (a frame is at least one token).
    const int64_t max_frames = e.params.media_limits.max_frames;
    if (m.is_video && m.n_frames > (max_frames > 0 ? max_frames : e.params.n_ctx)) {
      return invalid_argument(std::to_string(m.n_frames) + " frames; " +
                              (max_frames > 0 ? "the limit is " + std::to_string(max_frames) + " (--max-frames)"
                                              : "more than the context of " + std::to_string(e.params.n_ctx) +
                                                    " tokens holds (a frame is at least one token): sample fewer with "
                                                    "--frames or --fps"));
    }
    return layout_media(*e.vision, m.width, m.height, m.is_video ? m.n_frames : 1, m.is_video);
  };
  std::vector<VideoFrames> videos(media.size());
  for (size_t i = 0; i < media.size(); ++i)
    if (media[i].is_video) videos[i] = {media[i].n_frames, media[i].fps};
  VLKV_ASSIGN_OR_RETURN(PreparedPrompt laid_out,
                        assemble(e, text, media.size(), layout, /*with_data=*/false, add_bos, plain_spans, videos));
  return PromptTokenCount{laid_out.n_tokens(), laid_out.n_visual_tokens()};
}

}  // namespace vlkv
