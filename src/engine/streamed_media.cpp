#include "engine/streamed_media.h"

#include <chrono>
#include <mutex>
#include <string>

#include "engine/ingest_checkpoint.h"
#include "engine/visual_similarity.h"

namespace vlkv {

StreamedMediaEncoder::StreamedMediaEncoder(Engine::Impl& e, const PreparedPrompt& prompt, std::vector<double> mean_text)
    : e_(e), prompt_(prompt), mean_text_(std::move(mean_text)) {
  items_.resize(prompt.streams.size());
  for (size_t i = 0; i < prompt.streams.size(); ++i) items_[i].stream = prompt.streams[i];
  ordinal_.assign(prompt.chunks.size(), -1);
  std::vector<int64_t> seen(items_.size(), 0);
  for (size_t c = 0; c < prompt.chunks.size(); ++c) {
    const PromptChunk& ch = prompt.chunks[c];
    if (ch.kind != PromptChunk::Kind::kMedia || ch.media_index < 0 ||
        static_cast<size_t>(ch.media_index) >= items_.size() || !items_[static_cast<size_t>(ch.media_index)].stream)
      continue;
    ordinal_[c] = seen[static_cast<size_t>(ch.media_index)]++;
  }
}

Status StreamedMediaEncoder::lay_out_frame(Item& item, const std::string& what) {
  if (item.media_pieces_per_frame > 0) return Status::ok();
  const MediaInfo& info = item.stream->info();
  VLKV_ASSIGN_OR_RETURN(MediaEmbedding one, e_.vision->layout_image(info.width, info.height));
  for (const MediaPiece& p : one.pieces) item.media_pieces_per_frame += p.kind == MediaPiece::Kind::kEmbeddings;
  if (item.media_pieces_per_frame == 0) return Status(StatusCode::kInternal, what + ": a frame lays out no embeddings");
  return Status::ok();
}

bool StreamedMediaEncoder::ends_frame(int64_t c) const {
  if (!streams_chunk(c)) return false;
  const Item& item = items_[static_cast<size_t>(prompt_.chunks[static_cast<size_t>(c)].media_index)];
  return item.media_pieces_per_frame > 0 &&
         (ordinal_[static_cast<size_t>(c)] + 1) % item.media_pieces_per_frame == 0;
}

std::vector<IngestStreamState> StreamedMediaEncoder::stream_states() const {
  std::vector<IngestStreamState> out;
  for (size_t i = 0; i < items_.size(); ++i) {
    const Item& item = items_[i];
    if (!item.stream) continue;
    IngestStreamState s;
    s.media_index = static_cast<int32_t>(i);
    s.frames_done = item.media_pieces_per_frame > 0 ? item.next_ordinal / item.media_pieces_per_frame : 0;
    const MediaInfo& info = item.stream->info();
    s.n_frames = info.n_frames;
    s.width = info.width;
    s.height = info.height;
    s.fps = info.fps;
    s.last_frame_hash = s.frames_done > 0 ? item.last_frame_hash : 0;
    out.push_back(s);
  }
  return out;
}

Status StreamedMediaEncoder::skip_frames(int32_t media_index, int64_t n_frames, uint64_t last_frame_hash) {
  if (media_index < 0 || static_cast<size_t>(media_index) >= items_.size() || !items_[static_cast<size_t>(media_index)].stream)
    return invalid_argument("media input " + std::to_string(media_index + 1) + " is not a streamed video");
  Item& item = items_[static_cast<size_t>(media_index)];
  const std::string what = "media input " + std::to_string(media_index + 1);
  VLKV_RETURN_IF_ERROR(lay_out_frame(item, what));
  if (item.next_ordinal != 0) return Status(StatusCode::kInternal, what + ": skipped after it was fed");
  if (n_frames == 0) return Status::ok();
  Result<Image> last = item.stream->skip_to(
      n_frames, [&](const Image& f) { return frame_pixels_hash(f) == last_frame_hash; });
  if (!last.is_ok()) return last.status().with_context(what + ", skipping to frame " + std::to_string(n_frames));
  item.last_frame_hash = frame_pixels_hash(*last);
  if (item.last_frame_hash != last_frame_hash)
    return invalid_argument(what + ": frame " + std::to_string(n_frames - 1) +
                            " is not the one the checkpoint fed (the video file changed?)");
  item.next_ordinal = n_frames * item.media_pieces_per_frame;
  return Status::ok();
}

bool StreamedMediaEncoder::streams_chunk(int64_t c) const {
  return c >= 0 && static_cast<size_t>(c) < ordinal_.size() && ordinal_[static_cast<size_t>(c)] >= 0;
}

Result<StreamedMediaEncoder::Rows> StreamedMediaEncoder::rows(int64_t c) {
  if (!streams_chunk(c)) return Status(StatusCode::kInternal, "a chunk that is not a streamed video's was asked for");
  const PromptChunk& chunk = prompt_.chunks[static_cast<size_t>(c)];
  Item& item = items_[static_cast<size_t>(chunk.media_index)];
  const int64_t ordinal = ordinal_[static_cast<size_t>(c)];
  if (ordinal != item.next_ordinal)
    return Status(StatusCode::kInternal, "a streamed video's chunks were fed out of order");
  const std::string what = "media input " + std::to_string(chunk.media_index + 1);
  VLKV_RETURN_IF_ERROR(lay_out_frame(item, what));
  const int64_t in_frame = ordinal % item.media_pieces_per_frame;
  if (in_frame == 0) {  // the frame's first piece: decode and encode it, dropping the last one's
    const auto t0 = std::chrono::steady_clock::now();
    item.frame.clear();
    const int64_t index = item.stream->n_read();
    Result<Image> frame = item.stream->next();
    if (!frame.is_ok()) return frame.status().with_context(what + ", frame " + std::to_string(index));
    if (hash_frames_) item.last_frame_hash = frame_pixels_hash(*frame);
    Result<MediaEmbedding> emb = [&]() -> Result<MediaEmbedding> {
      std::lock_guard<std::mutex> lock(e_.forward_mutex);  // the pool is not re-entrant
      return e_.vision->encode_image(*frame, *e_.pool);
    }();
    if (!emb.is_ok()) return emb.status().with_context(what + ", frame " + std::to_string(index));
    for (MediaPiece& p : emb->pieces)
      if (p.kind == MediaPiece::Kind::kEmbeddings) item.frame.push_back(std::move(p));
    ++e_.n_media_encodes;
    ++frames_encoded_;
    encode_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (in_frame >= static_cast<int64_t>(item.frame.size()))
    return Status(StatusCode::kInternal, what + ": a frame encoded to fewer pieces than its layout");
  const EmbeddingRun& run = item.frame[static_cast<size_t>(in_frame)].embd;
  const int64_t width = e_.hparams.n_embd_inp();
  if (run.n_tokens != chunk.n_tokens || static_cast<int64_t>(run.data.size()) != chunk.n_tokens * width)
    return Status(StatusCode::kInternal, what + ": the encoder made " + std::to_string(run.n_tokens) +
                                             " visual tokens where its layout says " + std::to_string(chunk.n_tokens));
  ++item.next_ordinal;
  Rows out;
  out.embeddings = run.data.data();
  if (!mean_text_.empty()) {
    similarity_ = visual_similarity_of(run.data.data(), run.n_tokens, width, mean_text_);
    out.similarity = similarity_.empty() ? nullptr : similarity_.data();
  }
  return out;
}

}  // namespace vlkv
