// A multi-turn conversation that keeps its KV cache between turns: each turn evaluates only
// what the chat template adds for the new message (and its new images or videos), never the
// earlier turns again. The turn texts are llama-mtmd-cli's chat mode's (common_chat_format_single:
// the template of all turns minus the template of the earlier ones; the generated tokens stay
// in the cache as generated, the end-of-generation token is not evaluated), so the same
// conversation gives llama-mtmd-cli's answers.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vlkv/engine.h"

namespace vlkv {

struct ConversationOptions {
  std::string kv_method;      // "": the engine's
  bool use_template = true;   // wrap turns in the model's chat template (false: texts as given)
  std::string system_prompt;  // "" : none
};

// What one turn cost and reused.
struct TurnStats {
  GenerateStats generation;     // n_prompt_tokens: this turn's new tokens only
  int64_t n_cached_tokens = 0;  // tokens of earlier turns already in the cache, not evaluated again
};

class Conversation {
 public:
  // InvalidArgument for a KV method spec the engine refuses; OutOfMemory as new_session.
  static Result<std::unique_ptr<Conversation>> start(Engine& engine, ConversationOptions options);

  // Adds the user's message (with media: one kMediaMarker per item, prepended when the
  // message has none) and generates the answer, streaming its bytes to on_piece. On an error
  // (bad media, context full) the conversation is left as it was before the call when
  // nothing was evaluated yet; after a failure mid-evaluation it is cleared and says so.
  Status ask(const std::string& message, std::vector<MediaItem> media, const GenerateParams& params,
             const std::function<bool(const std::string&)>& on_piece, TurnStats* stats,
             const ProgressCallback& progress = {});

  // Writes the conversation to a KV file (docs/kv_file.md): its cache as Session::save_kv
  // writes it, plus the turns and what each fed (texts, generated ids, media content hashes;
  // not the media's pixels), so a loaded conversation continues exactly. `vlkv chat`'s /save.
  Status save(const std::string& path) const;
  // A conversation continuing from a file Conversation::save wrote, under kv_method ("": the
  // engine's; a file of another method is refused, as are files of another model or mmproj,
  // truncated or corrupted ones: one line naming the file). Its turns, system prompt and
  // template use are the file's. /kv afterwards needs the media again and is refused where a
  // turn had some.
  static Result<std::unique_ptr<Conversation>> load(Engine& engine, const std::string& path,
                                                    const std::string& kv_method = "");

  // A conversation continuing an ingest checkpoint (Engine::resume_session: the file's inputs
  // must be `inputs`): its next ask() must be the message and media the checkpoint was made
  // from, and evaluates only what the checkpoint does not hold. No turns before it (a checkpoint
  // is made of a conversation's first turn).
  static Result<std::unique_ptr<Conversation>> resume(Engine& engine, const std::string& path,
                                                      ConversationOptions options,
                                                      const std::vector<IngestInput>& inputs);
  // Checkpoints of the prefills of streamed videos in the following turns (ingest_checkpoint.h).
  void set_ingest_checkpointing(IngestCheckpointing checkpointing) {
    session_->set_ingest_checkpointing(std::move(checkpointing));
  }

  // Forgets every turn and frees the cache (the system prompt stays).
  Status clear();

  // Evaluates the conversation so far again under another KV method (the same tokens and
  // media, the media encoded again), so later turns run under it. The old cache is kept until
  // the new one is complete: on an error nothing changes.
  Status switch_kv_method(const std::string& kv_method, const ProgressCallback& progress = {});

  const std::vector<ChatTurn>& turns() const { return turns_; }
  const std::string& kv_method() const { return options_.kv_method; }
  const Session& session() const { return *session_; }

 private:
  // One evaluated step, kept to evaluate the conversation again under another method.
  struct FedTurn {
    Prompt prompt;                    // the turn's text with its media
    std::vector<int32_t> generated;   // then these tokens, as generated (end token excluded)
    std::vector<uint64_t> media_not_kept;  // loaded from a file: its media items' content hashes (no pixels)
  };
  Conversation(Engine& engine, ConversationOptions options);
  std::string turn_text(const ChatTurn& user) const;

  Engine& engine_;
  ConversationOptions options_;
  std::unique_ptr<Session> session_;
  std::vector<ChatTurn> turns_;  // system (if any), then user / assistant pairs
  std::vector<FedTurn> fed_;
};

}  // namespace vlkv
