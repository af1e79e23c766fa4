#include <algorithm>
#include <chrono>
#include <string>

#include "base/log.h"
#include "engine/decoder_feed.h"
#include "engine/engine_impl.h"
#include "engine/ingest_checkpoint.h"
#include "engine/kv_save.h"
#include "engine/sampler.h"
#include "engine/streamed_media.h"
#include "engine/visual_similarity.h"

namespace vlkv {

Session::Session(Engine::Impl* engine, int32_t seq)
    : engine_(engine), seq_(seq), history_(std::make_unique<SessionHistory>()) {}

void Session::set_ingest_checkpointing(IngestCheckpointing checkpointing) {
  checkpointing_.reset();
  if (!checkpointing.path.empty()) checkpointing_ = std::make_unique<IngestCheckpointing>(std::move(checkpointing));
}

int64_t Session::n_resumed() const { return resume_ ? resume_->rows_done : 0; }

Session::~Session() {
  std::lock_guard<std::mutex> lock(engine_->forward_mutex);
  engine_->kv->remove_sequence(seq_);
}

int64_t Session::n_past() const { return n_past_; }

Result<std::unique_ptr<Session>> Session::fork() const {
  std::lock_guard<std::mutex> lock(engine_->forward_mutex);
  KvCache& kv = *engine_->kv;
  VLKV_ASSIGN_OR_RETURN(SeqId seq, kv.add_sequence(kv.sequence_method(seq_)));
  Status st = kv.copy_sequence(seq_, seq);
  if (!st.is_ok()) {
    kv.remove_sequence(seq);
    return st;
  }
  std::unique_ptr<Session> s(new Session(engine_, seq));
  s->n_past_ = n_past_;
  s->next_pos_ = next_pos_;
  *s->history_ = *history_;
  return s;
}

void Session::set_attention_observer(std::function<void(const AttentionTap&)> observer) {
  if (!observer) {
    observer_ = nullptr;
    return;
  }
  const TextHparams& hp = engine_->hparams;
  observer_ = [observer = std::move(observer), &hp](const LayerQk& x) {
    AttentionTap t;
    t.layer = x.layer;
    t.n_tokens = x.n_tokens;
    t.n_heads = static_cast<int>(hp.n_heads);
    t.n_kv_heads = static_cast<int>(hp.n_kv_heads);
    t.head_dim = static_cast<int>(hp.head_dim);
    t.scale = hp.attn_scale;
    t.q = x.q;
    t.k = x.k;
    t.kinds = reinterpret_cast<const uint8_t*>(x.kinds);  // TokenKind is a uint8_t enum
    observer(t);
  };
}
int64_t Session::n_vocab() const { return engine_->hparams.n_vocab; }

std::string Session::kv_description() const {
  std::lock_guard<std::mutex> lock(engine_->forward_mutex);
  return engine_->kv->describe_sequence(seq_);
}

uint64_t Session::kv_held_bytes() const {
  std::lock_guard<std::mutex> lock(engine_->forward_mutex);
  return engine_->kv->sequence_bytes(seq_);
}

double Session::kv_stored_bytes() const {
  std::lock_guard<std::mutex> lock(engine_->forward_mutex);
  return engine_->kv->stored_bytes(seq_);
}

void Session::warn_if_text_only(int64_t n_visual_tokens) {
  if (n_past_ > 0 || n_visual_tokens > 0) return;  // only a sequence's first prompt tells
  const std::string note = engine_->kv->without_visual_tokens();
  if (note.empty() || engine_->warned_text_only.exchange(true)) return;
  VLKV_LOG_WARN("warning: KV method %s: this prompt has no visual tokens: %s", engine_->kv->method_name().c_str(),
                note.c_str());
}

Status Session::check_room(int64_t n_tokens, const char* what) const {
  const int64_t n_ctx = engine_->params.n_ctx;
  if (n_past_ + n_tokens <= n_ctx) return Status::ok();
  return invalid_argument("context full: " + std::to_string(n_past_) + " + " + std::to_string(n_tokens) + " " + what +
                          " exceed the context size of " + std::to_string(n_ctx) + " (raise --ctx-size)");
}

// Rows [begin, begin + n) of segment sg, now in the cache, into the history (KV files).
void Session::record_rows(const PromptLayout& layout, const FeedSegment& sg, int64_t begin, int64_t n) {
  SessionHistory& h = *history_;
  for (int64_t i = begin; i < begin + n; ++i) {
    h.ids.push_back(layout.tokens[i]);
    h.kinds.push_back(static_cast<uint8_t>(layout.kinds[i]));
    h.pos.push_back(layout.positions[i]);
    for (int c = 0; c < 3; ++c) h.mrope.push_back(sg.mrope.empty() ? -1 : sg.mrope[(i - sg.begin) * 3 + c]);
  }
}

// A laid-out prompt through the decoder, n_batch rows at most per forward pass and never
// across a segment (text ids / one media item), from row first_row (a segment boundary: the rows
// before are in the cache). logits: null (none); every row's appended (all_logits); else the
// last row's. streamed: the rows of unencoded media segments (a streamed video's frames, encoded
// here one at a time). after_segment: after each segment fed, outside the forward lock; its
// error ends the feed there.
Status Session::feed(const PromptLayout& layout, bool all_logits, std::vector<float>* logits,
                     const ProgressCallback& progress, StreamedMediaEncoder* streamed, int64_t first_row,
                     const std::function<Status(const FeedSegment&)>& after_segment) {
  const int64_t n_batch = engine_->params.n_batch;
  const int64_t n_rows = layout.n_rows();
  if (logits) logits->clear();
  std::vector<float> chunk_logits;
  for (const FeedSegment& sg : layout.segments) {
    if (sg.end <= first_row) continue;
    StreamedMediaEncoder::Rows given;
    const bool from_stream = sg.media && !sg.embeddings && streamed && streamed->streams_chunk(sg.chunk);
    if (from_stream) {  // decoded and encoded now, under the forward lock, which the feed below takes again
      VLKV_ASSIGN_OR_RETURN(given, streamed->rows(sg.chunk));
    }
    {
      std::lock_guard<std::mutex> lock(engine_->forward_mutex);
      for (int64_t begin = sg.begin; begin < sg.end; begin += n_batch) {
        const int64_t n = std::min(sg.end - begin, n_batch);
        DecoderInput in = from_stream ? layout.rows(sg, begin, n, given.embeddings, given.similarity) : layout.rows(begin, n);
        if (observer_) in.observer = &observer_;
        const LogitsMode mode = !logits ? LogitsMode::kNone
                                : all_logits ? LogitsMode::kAll
                                : begin + n == n_rows ? LogitsMode::kLast
                                                      : LogitsMode::kNone;
        VLKV_RETURN_IF_ERROR(engine_->decoder->forward(in, *engine_->kv, seq_, mode, chunk_logits, *engine_->pool));
        n_past_ += n;
        record_rows(layout, sg, begin, n);
        if (mode != LogitsMode::kNone) logits->insert(logits->end(), chunk_logits.begin(), chunk_logits.end());
        if (progress) progress("prefill", begin + n, n_rows);
      }
    }
    if (after_segment) VLKV_RETURN_IF_ERROR(after_segment(sg));
  }
  next_pos_ = layout.next_pos;
  return Status::ok();
}

Status Session::eval(const std::vector<int32_t>& tokens, bool all_logits, std::vector<float>* logits) {
  if (tokens.empty()) return invalid_argument("nothing to evaluate: empty token list");
  VLKV_RETURN_IF_ERROR(check_room(static_cast<int64_t>(tokens.size()), "tokens"));
  warn_if_text_only(0);
  VLKV_RETURN_IF_ERROR(feed(lay_out_tokens(tokens, next_pos_), all_logits, logits, {}));
  if (logits && !all_logits && static_cast<int64_t>(logits->size()) != engine_->hparams.n_vocab) {
    return Status(StatusCode::kInternal, "logits size mismatch");
  }
  return Status::ok();
}

Status Session::eval_prompt(const PreparedPrompt& prompt, std::vector<float>* last_logits,
                            const ProgressCallback& progress) {
  if (prompt.chunks.empty()) return invalid_argument("nothing to evaluate: empty prompt");
  const int64_t total = prompt.n_tokens();
  const int64_t resumed = n_resumed();  // the prompt's first rows, from a checkpoint
  VLKV_RETURN_IF_ERROR(check_room(total - resumed, "prompt tokens"));
  if (resumed == 0) warn_if_text_only(prompt.n_visual_tokens());
  for (const PromptChunk& c : prompt.chunks)
    if (c.n_tokens <= 0) return invalid_argument("nothing to evaluate: empty chunk");
  // A method keeping salient visual tokens needs each one's similarity to the prompt's text.
  const bool similarity = engine_->kv->uses_visual_similarity();
  bool has_streams = false;
  for (const std::shared_ptr<VideoStream>& s : prompt.streams) has_streams |= s != nullptr;
  VLKV_ASSIGN_OR_RETURN(PromptLayout layout,
                        lay_out_prompt(*engine_, prompt, next_pos_, similarity, /*allow_unencoded=*/has_streams));
  std::unique_ptr<StreamedMediaEncoder> streamed;
  if (has_streams) {
    const Tokenizer& tok = *engine_->tokenizer;
    std::vector<double> mean_text;
    if (similarity)
      mean_text = mean_text_embedding(prompt, engine_->weights.token_embd,
                                      [&](int32_t t) { return tok.token_type(t) != TokenType::kControl; });
    streamed = std::make_unique<StreamedMediaEncoder>(*engine_, prompt, std::move(mean_text));
    // Media rows left unencoded must all be a stream's: anything else cannot be fed.
    for (const FeedSegment& sg : layout.segments)
      if (sg.media && !sg.embeddings && !streamed->streams_chunk(sg.chunk))
        return invalid_argument("a media chunk of the prompt has no embeddings");
    if (checkpointing_ || resume_) streamed->keep_frame_hashes();
  }
  if (resume_) VLKV_RETURN_IF_ERROR(check_resume(layout, prompt, streamed.get()));
  const int64_t first_row = n_past_ - resumed;  // the prompt's first row in the cache
  resume_.reset();  // from here on the rows in the cache are this prompt's, fed or not
  // At each frame boundary: the frames' progress, and checkpoints when asked for.
  std::unique_ptr<IngestCheckpointer> checkpointer;
  if (streamed && checkpointing_) {
    IngestCheckpointState base;
    base.prompt_first_row = first_row;
    base.n_rows = layout.n_rows();
    base.layout = layout_digest(layout);
    base.n_batch = engine_->params.n_batch;
    base.exact_matmul = engine_->params.exact_matmul;
    base.n_threads = engine_->pool->n_threads();
    base.inputs = checkpointing_->inputs;
    base.streams = streamed->stream_states();
    const int64_t frames_now = base.frames_done();
    checkpointer = std::make_unique<IngestCheckpointer>(*checkpointing_, *this, std::move(base), frames_now);
  }
  std::function<Status(const FeedSegment&)> at_segment;
  if (streamed) {
    int64_t n_frames = 0;
    for (const IngestStreamState& s : streamed->stream_states()) n_frames += s.n_frames;
    at_segment = [&, n_frames](const FeedSegment& sg) -> Status {
      if (!sg.media || !streamed->ends_frame(sg.chunk)) return Status::ok();
      const std::vector<IngestStreamState> states = streamed->stream_states();
      int64_t done = 0;
      for (const IngestStreamState& s : states) done += s.frames_done;
      if (progress) progress("frames", done, n_frames);
      return checkpointer ? checkpointer->at_frame_boundary(states, n_past_ - first_row) : Status::ok();
    };
  }
  const Status st = feed(layout, false, last_logits, progress, streamed.get(), resumed, at_segment);
  streamed_encode_seconds_ = streamed ? streamed->encode_seconds() : 0.0;
  streamed_frames_encoded_ = streamed ? streamed->frames_encoded() : 0;
  int64_t row = first_row;  // the media items now in the cache, by content hash
  for (const PromptChunk& c : prompt.chunks) {
    if (c.kind == PromptChunk::Kind::kMedia && row + c.n_tokens <= n_past_)
      history_->media.push_back(MediaRecord{c.media_hash, row, c.n_tokens, c.grid_t, c.grid_h, c.grid_w});
    row += c.n_tokens;
  }
  return st;
}

Status Session::sample_loop(Sampler& sampler, std::vector<float>& logits, const GenerateParams& params,
                            const std::function<bool(const std::string&)>& on_piece, GenerateStats& st) {
  using Clock = std::chrono::steady_clock;
  const int n_vocab = static_cast<int>(engine_->hparams.n_vocab);
  auto t1 = Clock::now();
  Status result = Status::ok();
  for (int64_t i = 0; i < params.max_tokens; ++i) {
    const TokenId next = sample_step(sampler, params.logits_processor.get(), logits.data(), n_vocab);
    if (!params.ignore_eos && engine_->tokenizer->is_end_of_generation(next)) {
      st.stopped_at_eos = true;
      break;
    }
    ++st.n_generated;
    st.tokens.push_back(next);
    if (on_piece && !on_piece(engine_->tokenizer->token_to_piece(next))) {
      st.unevaluated_token = next;
      break;
    }
    if (i + 1 == params.max_tokens) {  // no need to evaluate the last token now
      st.unevaluated_token = next;
      break;
    }
    if (n_past_ + 1 > engine_->params.n_ctx) {  // no room for it: the answer ends, as at max_tokens
      st.unevaluated_token = next;
      st.stopped_at_context = true;
      break;
    }
    result = eval({next}, false, &logits);
    if (!result.is_ok()) break;
  }
  st.decode_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return result;
}

Status Session::generate(const std::string& prompt, const GenerateParams& params,
                         const std::function<bool(const std::string&)>& on_piece, GenerateStats* stats) {
  using Clock = std::chrono::steady_clock;
  if (params.max_tokens < 0) return invalid_argument("number of tokens to generate must be >= 0");
  VLKV_RETURN_IF_ERROR(validate_sampler_params(params.sampling));
  Sampler sampler(params.sampling);

  // The first turn of a session gets BOS as the tokenizer's metadata says.
  std::vector<int32_t> prompt_tokens = engine_->tokenizer->encode(prompt, /*add_special=*/n_past_ == 0,
                                                                  /*parse_special=*/true);
  if (prompt_tokens.empty()) return invalid_argument("the prompt is empty after tokenization");
  for (int32_t t : prompt_tokens) sampler.accept(t);

  GenerateStats local;
  GenerateStats& st = stats ? *stats : local;
  st = GenerateStats{};
  st.n_prompt_tokens = static_cast<int64_t>(prompt_tokens.size());
  std::vector<float> logits;
  auto t0 = Clock::now();
  VLKV_RETURN_IF_ERROR(eval(prompt_tokens, false, &logits));
  st.prefill_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return sample_loop(sampler, logits, params, on_piece, st);
}

Status Session::generate(const Prompt& prompt, const GenerateParams& params,
                         const std::function<bool(const std::string&)>& on_piece, GenerateStats* stats,
                         const ProgressCallback& progress) {
  using Clock = std::chrono::steady_clock;
  if (params.max_tokens < 0) return invalid_argument("number of tokens to generate must be >= 0");
  VLKV_RETURN_IF_ERROR(validate_sampler_params(params.sampling));

  // Media are encoded before anything is evaluated or printed: a bad image fails here.
  auto t_enc = Clock::now();
  // BOS on the session's first turn (a resumed checkpoint's rows are this turn's).
  VLKV_ASSIGN_OR_RETURN(PreparedPrompt prepared,
                        prepare_prompt(*engine_, prompt, /*add_bos=*/n_past_ - n_resumed() == 0, progress));
  const double prepare_seconds = std::chrono::duration<double>(Clock::now() - t_enc).count();
  if (prepared.n_tokens() == 0) return invalid_argument("the prompt is empty after tokenization");
  Sampler sampler(params.sampling);
  for (const PromptChunk& c : prepared.chunks) {
    for (int32_t t : c.tokens) sampler.accept(t);
  }
  GenerateStats local;
  GenerateStats& st = stats ? *stats : local;
  st = GenerateStats{};
  st.n_prompt_tokens = prepared.n_tokens();
  st.n_visual_tokens = prepared.n_visual_tokens();
  st.n_cached_tokens = n_resumed();
  st.encode_seconds = prepared.encode_seconds > 0 ? prepared.encode_seconds : prepare_seconds;
  std::vector<float> logits;
  auto t0 = Clock::now();
  VLKV_RETURN_IF_ERROR(eval_prompt(prepared, &logits, progress));
  st.prefill_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  st.n_frames_encoded = streamed_frames_encoded_;
  if (streamed_encode_seconds_ > 0) {  // a streamed video was encoded during the prefill: counted as encoding
    st.encode_seconds += streamed_encode_seconds_;
    st.prefill_seconds = std::max(st.prefill_seconds - streamed_encode_seconds_, 1e-9);
  }
  return sample_loop(sampler, logits, params, on_piece, st);
}

}  // namespace vlkv

namespace vlkv {

Status Engine::decode_batch(const std::vector<Session*>& sessions, const std::vector<int32_t>& tokens,
                            std::vector<std::vector<float>>* logits, std::vector<Status>* statuses) {
  if (sessions.size() != tokens.size()) return invalid_argument("decode_batch: one token per session");
  if (!logits) return invalid_argument("decode_batch: null logits");
  const size_t n = sessions.size();
  logits->resize(n);
  if (statuses) statuses->assign(n, Status::ok());
  std::vector<BatchSequence> batch(n);
  std::vector<DecodeRow> rows(n);
  for (size_t i = 0; i < n; ++i) {
    Session* s = sessions[i];
    if (!s || s->engine_ != impl_.get()) return invalid_argument("decode_batch: a session of another engine");
    VLKV_RETURN_IF_ERROR(s->check_room(1, "tokens"));
    rows[i] = DecodeRow{tokens[i], s->next_pos_};
    BatchSequence& b = batch[i];
    b.seq = s->seq_;
    b.in = rows[i].input();
    b.mode = LogitsMode::kLast;
    b.logits = &(*logits)[i];
  }
  {
    std::lock_guard<std::mutex> lock(impl_->forward_mutex);
    VLKV_RETURN_IF_ERROR(impl_->decoder->forward_batch(batch, *impl_->kv, *impl_->pool));
  }
  Status first = Status::ok();
  for (size_t i = 0; i < n; ++i) {
    if (batch[i].status.is_ok()) {
      SessionHistory& h = *sessions[i]->history_;
      h.ids.push_back(tokens[i]);
      h.kinds.push_back(static_cast<uint8_t>(TokenKind::kText));
      h.pos.push_back(sessions[i]->next_pos_);
      h.mrope.insert(h.mrope.end(), 3, -1);
      ++sessions[i]->n_past_;
      ++sessions[i]->next_pos_;
    } else if (first.is_ok()) {
      first = batch[i].status;
    }
    if (statuses) (*statuses)[i] = batch[i].status;
  }
  return statuses ? Status::ok() : first;
}

}  // namespace vlkv
