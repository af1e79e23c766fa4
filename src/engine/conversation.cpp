#include "vlkv/conversation.h"

#include <algorithm>
#include <utility>

namespace vlkv {

Conversation::Conversation(Engine& engine, ConversationOptions options)
    : engine_(engine), options_(std::move(options)) {}

Result<std::unique_ptr<Conversation>> Conversation::start(Engine& engine, ConversationOptions options) {
  std::unique_ptr<Conversation> c(new Conversation(engine, std::move(options)));
  VLKV_RETURN_IF_ERROR(c->clear());  // its session (new_session checks the method spec), the system prompt
  return c;
}

// llama.cpp's common_chat_format_single: the template of all turns with the new one, minus
// the template of the earlier ones; a newline the earlier text ended with is repeated before
// a user turn (llama.cpp keeps it so; the cache does not hold it otherwise).
std::string Conversation::turn_text(const ChatTurn& turn) const {
  if (!options_.use_template) return turn.content;
  const bool add_assistant = turn.role == "user";
  const std::string past = turns_.empty() ? std::string() : engine_.apply_chat_template(turns_, false);
  std::vector<ChatTurn> all = turns_;
  all.push_back(turn);
  const std::string now = engine_.apply_chat_template(all, add_assistant);
  std::string text = add_assistant && !past.empty() && past.back() == '\n' ? "\n" : "";
  // Every built-in template appends a turn without rewriting earlier ones; were one not to,
  // the difference below would cut the wrong bytes.
  if (now.compare(0, past.size(), past) == 0) return text + now.substr(past.size());
  return {};
}

Result<std::unique_ptr<Conversation>> Conversation::resume(Engine& engine, const std::string& path,
                                                           ConversationOptions options,
                                                           const std::vector<IngestInput>& inputs) {
  if (!options.system_prompt.empty())
    return invalid_argument("a checkpoint continues a conversation's first turn: no system prompt");
  VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, engine.resume_session(path, options.kv_method, inputs));
  if (session->n_past() != session->n_resumed())
    return invalid_argument(path + ": the checkpoint's prompt is not a conversation's first turn");
  std::unique_ptr<Conversation> c(new Conversation(engine, std::move(options)));
  c->session_ = std::move(session);
  return c;
}

Status Conversation::clear() {
  VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Session> fresh, engine_.new_session(options_.kv_method));
  session_ = std::move(fresh);  // the old session's pages are freed here
  turns_.clear();
  fed_.clear();
  if (options_.system_prompt.empty()) return Status::ok();
  const ChatTurn system{"system", options_.system_prompt};
  FedTurn fed{Prompt{turn_text(system), {}, {}, {}}, {}, {}};
  VLKV_ASSIGN_OR_RETURN(PreparedPrompt prepared, engine_.prepare_prompt(fed.prompt, /*add_bos=*/true));
  std::vector<float> logits;
  VLKV_RETURN_IF_ERROR(session_->eval_prompt(prepared, &logits));
  turns_.push_back(system);
  fed_.push_back(std::move(fed));
  return Status::ok();
}

Status Conversation::ask(const std::string& message, std::vector<MediaItem> media, const GenerateParams& params,
                         const std::function<bool(const std::string&)>& on_piece, TurnStats* stats,
                         const ProgressCallback& progress) {
  const ChatTurn user{"user", with_media_markers(message, media.size())};
  FedTurn fed{Prompt{turn_text(user), media, {}, {}}, {}, {}};
  if (fed.prompt.text.empty()) return unsupported("the chat template rewrote an earlier turn; /clear to start over");
  TurnStats local;
  TurnStats& st = stats ? *stats : local;
  st = TurnStats{};
  // Rows of this turn a resumed checkpoint holds are the turn's, not an earlier one's.
  const int64_t n_before = st.n_cached_tokens = session_->n_past() - session_->n_resumed();
  std::string answer;
  auto collect = [&](const std::string& piece) {
    answer += piece;
    return on_piece ? on_piece(piece) : true;
  };
  Status s = session_->generate(fed.prompt, params, collect, &st.generation, progress);
  if (s.is_ok() && st.generation.unevaluated_token >= 0 && !st.generation.stopped_at_context) {
    std::vector<float> logits;  // llama-mtmd-cli evaluates every generated token but the end one
    s = session_->eval({st.generation.unevaluated_token}, false, &logits);
  }
  // A failed eval leaves the session as it was before that call, so the cache holds the
  // prompt (or none of it) and the generated tokens that were evaluated.
  // (A resumed checkpoint refused before its first row was fed is still pending: not counted.)
  const int64_t n_in_cache = session_->n_past() - n_before - session_->n_resumed();
  const int64_t n_answer_in_cache = n_in_cache - st.generation.n_prompt_tokens;
  if (!s.is_ok() && n_in_cache == 0) return s;  // refused before anything was evaluated
  if (!s.is_ok() && n_answer_in_cache < 0) {    // the prompt itself failed part way
    const Status cleared = clear();
    return Status(s.code(), s.message() + (cleared.is_ok() ? " (the conversation was cleared)"
                                                           : " (clearing it failed too: " + cleared.message() + ")"));
  }
  // Kept, cut or not: the answer's evaluated tokens are the conversation's from now on.
  fed.generated.assign(st.generation.tokens.begin(),
                       st.generation.tokens.begin() + std::min<int64_t>(n_answer_in_cache, st.generation.tokens.size()));
  turns_.push_back(user);
  turns_.push_back({"assistant", answer});
  fed_.push_back(std::move(fed));
  if (!s.is_ok()) return Status(s.code(), s.message() + " (the answer was cut there; the conversation is kept)");
  return Status::ok();
}

Status Conversation::switch_kv_method(const std::string& kv_method, const ProgressCallback& progress) {
  for (const FedTurn& turn : fed_)
    if (!turn.media_not_kept.empty())
      return unsupported("this conversation was loaded from a KV file, which holds no images or videos: switching "
                         "the KV method needs them to encode them again (/clear to start over)");
  for (const FedTurn& turn : fed_)
    for (const MediaItem& m : turn.prompt.media)
      if (m.stream)
        return unsupported("this conversation streamed a video, whose frames are not kept: switching the KV method "
                           "needs them to encode them again (/clear to start over)");
  VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Session> fresh, engine_.new_session(kv_method));  // checks the spec
  std::vector<float> logits;
  for (const FedTurn& turn : fed_) {
    VLKV_ASSIGN_OR_RETURN(PreparedPrompt prepared,
                          engine_.prepare_prompt(turn.prompt, /*add_bos=*/fresh->n_past() == 0, progress));
    VLKV_RETURN_IF_ERROR(fresh->eval_prompt(prepared, &logits, progress));
    if (!turn.generated.empty()) VLKV_RETURN_IF_ERROR(fresh->eval(turn.generated, false, &logits));
  }
  session_ = std::move(fresh);
  options_.kv_method = kv_method;
  return Status::ok();
}

}  // namespace vlkv
