// Conversation::save / load: a KV file (kv_save.h) with a conversation section holding the
// options, the turns and what each turn fed (docs/kv_file.md).
#include <utility>

#include "base/safe_file.h"
#include "engine/kv_file.h"
#include "engine/kv_save.h"
#include "engine/media_cache.h"
#include "kv/kv_bytes.h"
#include "vlkv/conversation.h"

namespace vlkv {

Status Conversation::save(const std::string& path) const {
  VLKV_RETURN_IF_ERROR(check_writable_file(path));  // before the encode, not after it
  std::string b;
  ByteWriter w(&b);
  w.put<uint8_t>(options_.use_template ? 1 : 0);
  w.str(options_.system_prompt);
  w.put<uint64_t>(turns_.size());
  for (const ChatTurn& t : turns_) {
    w.str(t.role);
    w.str(t.content);
  }
  w.put<uint64_t>(fed_.size());
  for (const FedTurn& f : fed_) {
    w.str(f.prompt.text);
    std::vector<uint64_t> hashes = f.media_not_kept;
    for (const MediaItem& m : f.prompt.media) hashes.push_back(media_content_hash(media_content_digest(m)));
    w.vec(hashes);
    w.vec(f.generated);
  }
  if (Result<uint64_t> st = SessionFile::write(*session_, &b, path); !st.is_ok())
    return st.status().with_context("saving the conversation to " + path);
  return Status::ok();
}

Result<std::unique_ptr<Conversation>> Conversation::load(Engine& engine, const std::string& path,
                                                         const std::string& kv_method) {
  Engine::Impl& e = engine.impl();
  VLKV_ASSIGN_OR_RETURN(std::vector<uint8_t> data, read_kv_file(path, SessionFile::max_file_bytes(e)));
  std::string section;
  Result<std::unique_ptr<Session>> session = SessionFile::load(e, data.data(), data.size(), kv_method, &section);
  if (!session.is_ok()) return Status(session.status().code(), path + ": " + session.status().message());
  if (section.empty())
    return invalid_argument(path + ": holds a KV cache but no conversation (written by vlkv run --save-kv: load it "
                                   "there with --load-kv)");
  auto bad = [&] { return invalid_file(path + ": malformed conversation section"); };
  ByteReader r(reinterpret_cast<const uint8_t*>(section.data()), section.size());
  ConversationOptions options;
  options.kv_method = kv_method;
  const uint8_t tmpl = r.get<uint8_t>();
  options.use_template = tmpl == 1;
  options.system_prompt = r.str(uint64_t{1} << 30);
  if (!r.ok() || tmpl > 1) return bad();
  std::unique_ptr<Conversation> c(new Conversation(engine, std::move(options)));
  const uint64_t n_turns = r.count(uint64_t{1} << 24, 16);
  for (uint64_t i = 0; i < n_turns && r.ok(); ++i) {
    ChatTurn t;
    t.role = r.str(64);
    t.content = r.str(uint64_t{1} << 30);
    if (t.role != "system" && t.role != "user" && t.role != "assistant") return bad();
    c->turns_.push_back(std::move(t));
  }
  const uint64_t n_fed = r.count(uint64_t{1} << 24, 24);
  int64_t n_generated = 0;
  for (uint64_t i = 0; i < n_fed && r.ok(); ++i) {
    FedTurn f;
    f.prompt.text = r.str(uint64_t{1} << 30);
    f.media_not_kept = r.vec<uint64_t>(1 << 20);
    f.generated = r.vec<int32_t>(static_cast<uint64_t>(e.params.n_ctx));
    n_generated += static_cast<int64_t>(f.generated.size());
    c->fed_.push_back(std::move(f));
  }
  if (!r.ok() || !r.at_end() || n_generated > (*session)->n_past()) return bad();
  c->session_ = std::move(session).value();
  return c;
}

}  // namespace vlkv
