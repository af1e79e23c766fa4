#include "engine/streamed_media.h"

#include <chrono>
#include <mutex>
#include <string>

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
  if (item.media_pieces_per_frame == 0) {
    const MediaInfo& info = item.stream->info();
    VLKV_ASSIGN_OR_RETURN(MediaEmbedding one, e_.vision->layout_image(info.width, info.height));
    for (const MediaPiece& p : one.pieces) item.media_pieces_per_frame += p.kind == MediaPiece::Kind::kEmbeddings;
    if (item.media_pieces_per_frame == 0) return Status(StatusCode::kInternal, what + ": a frame lays out no embeddings");
  }
  const int64_t in_frame = ordinal % item.media_pieces_per_frame;
  if (in_frame == 0) {  // the frame's first piece: decode and encode it, dropping the last one's
    const auto t0 = std::chrono::steady_clock::now();
    item.frame.clear();
    const int64_t index = item.stream->n_read();
    Result<Image> frame = item.stream->next();
    if (!frame.is_ok()) return frame.status().with_context(what + ", frame " + std::to_string(index));
    Result<MediaEmbedding> emb = [&]() -> Result<MediaEmbedding> {
      std::lock_guard<std::mutex> lock(e_.forward_mutex);  // the pool is not re-entrant
      return e_.vision->encode_image(*frame, *e_.pool);
    }();
    if (!emb.is_ok()) return emb.status().with_context(what + ", frame " + std::to_string(index));
    for (MediaPiece& p : emb->pieces)
      if (p.kind == MediaPiece::Kind::kEmbeddings) item.frame.push_back(std::move(p));
    ++e_.n_media_encodes;
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
