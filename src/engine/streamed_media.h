// A streamed prompt's videos (MediaItem::stream) encoded frame by frame as the decoder
// reaches them: each frame is decoded, encoded and its pieces fed, then dropped, so a long
// video costs one frame's pixels and embeddings at a time on top of its KV cache. Only for
// families whose video pieces are their frames' image pieces in turn
// (VisionModel::video_frames_independent); prepare_prompt reads the others whole.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/engine_impl.h"
#include "engine/ingest_checkpoint.h"

namespace vlkv {

class StreamedMediaEncoder {
 public:
  // prompt: from prepare_prompt, alive while feeding. mean_text: the prompt's mean text
  // embedding when the KV method reads visual-text similarities (else empty).
  StreamedMediaEncoder(Engine::Impl& e, const PreparedPrompt& prompt, std::vector<double> mean_text);

  // Whether chunk c is a streamed item's media chunk (its embeddings come from here).
  bool streams_chunk(int64_t c) const;

  // The rows of media chunk c, a streamed item's: when c is its frame's first piece, the next
  // frame is decoded and encoded (under the engine's forward lock). Chunks of one item must be
  // asked for in order. The views stay valid until the next call.
  struct Rows {
    const float* embeddings = nullptr;  // [n_tokens, n_embd_inp]
    const float* similarity = nullptr;  // [n_tokens], or null when not asked for
  };
  Result<Rows> rows(int64_t c);

  // Seconds spent decoding and encoding frames so far, and the frames encoded.
  double encode_seconds() const { return encode_seconds_; }
  int64_t frames_encoded() const { return frames_encoded_; }

  // Whether chunk c (a streamed one) is the last piece of its frame: once fed, a frame boundary.
  bool ends_frame(int64_t c) const;
  // Each streamed video's frames fed so far (whole), its plan and its last frame's hash
  // (ingest checkpoints; hashes are kept once keep_frame_hashes is called).
  std::vector<IngestStreamState> stream_states() const;
  void keep_frame_hashes() { hash_frames_ = true; }
  // A resumed prefill: video media_index's first n_frames frames are in the cache already. The
  // stream skips them (VideoStream::skip_to: not converted, not encoded) and the frame before is
  // checked against last_frame_hash, the one the checkpoint fed.
  Status skip_frames(int32_t media_index, int64_t n_frames, uint64_t last_frame_hash);

 private:
  struct Item {
    std::shared_ptr<VideoStream> stream;
    int64_t media_pieces_per_frame = 0;  // kEmbeddings pieces layout_image makes of one frame
    int64_t next_ordinal = 0;            // the next media chunk of this item to feed
    std::vector<MediaPiece> frame;       // the current frame's embedding pieces
    uint64_t last_frame_hash = 0;        // frame_pixels_hash of the last frame read (hash_frames_)
  };
  Status lay_out_frame(Item& item, const std::string& what);
  Engine::Impl& e_;
  const PreparedPrompt& prompt_;
  std::vector<double> mean_text_;
  std::vector<Item> items_;              // by media index
  std::vector<int64_t> ordinal_;         // by chunk: its ordinal among its item's media chunks (-1: not streamed)
  std::vector<float> similarity_;
  double encode_seconds_ = 0;
  int64_t frames_encoded_ = 0;
  bool hash_frames_ = false;
};

}  // namespace vlkv
