// Session::save_kv, Engine::load_session: a session's sections of a KV file (docs/kv_file.md).
#include "engine/kv_save.h"

#include <cstdio>
#include <map>

#include "base/safe_file.h"
#include "engine/content_hash.h"
#include "engine/kv_file.h"
#include "kv/kv_bytes.h"
#include "kv/page_pool.h"

namespace vlkv {
namespace {

// The canonical spec of a method spec ("": the engine's), as the cache stores sequences with it.
Result<std::string> canonical_method(Engine::Impl& e, const std::string& spec) {
  KvCache& kv = *e.kv;
  VLKV_ASSIGN_OR_RETURN(SeqId probe, kv.add_sequence(spec));
  const std::string canonical = kv.sequence_method(probe);
  kv.remove_sequence(probe);
  return canonical;
}

constexpr uint64_t kMaxMediaItems = 1 << 20;
// Positions far past any context (2^40) and far from overflowing when a turn's tokens are
// added to them: a file's next position and every row's position must lie within.
constexpr int64_t kMaxPosition = int64_t{1} << 40;

}  // namespace

std::string identity_section(const Engine::Impl& e, bool with_mmproj) {
  std::string b;
  ByteWriter w(&b);
  w.str(e.info.architecture);
  w.str(e.info.name);
  w.put(e.model_id.hi);
  w.put(e.model_id.lo);
  w.put<uint32_t>(static_cast<uint32_t>(e.hparams.n_layers));
  w.put<uint32_t>(static_cast<uint32_t>(e.hparams.n_heads));
  w.put<uint32_t>(static_cast<uint32_t>(e.hparams.n_kv_heads));
  w.put<uint32_t>(static_cast<uint32_t>(e.hparams.head_dim));
  with_mmproj = with_mmproj && e.mmproj;  // the mmproj matters only when its embeddings are in the cache
  w.put<uint8_t>(with_mmproj ? 1 : 0);
  if (with_mmproj) {
    w.put(e.mmproj_id.hi);
    w.put(e.mmproj_id.lo);
  }
  return b;
}

Status check_identity_section(const Engine::Impl& e, const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  const std::string arch = r.str(256), name = r.str(4096);
  Digest128 model, mm;
  model.hi = r.get<uint64_t>();
  model.lo = r.get<uint64_t>();
  uint32_t geo[4];
  for (uint32_t& x : geo) x = r.get<uint32_t>();
  const uint8_t with_mmproj = r.get<uint8_t>();
  if (with_mmproj == 1) {
    mm.hi = r.get<uint64_t>();
    mm.lo = r.get<uint64_t>();
  }
  if (!r.ok() || !r.at_end() || with_mmproj > 1) return invalid_file("malformed identity section");
  const uint32_t our_geo[4] = {static_cast<uint32_t>(e.hparams.n_layers), static_cast<uint32_t>(e.hparams.n_heads),
                               static_cast<uint32_t>(e.hparams.n_kv_heads), static_cast<uint32_t>(e.hparams.head_dim)};
  if (!(model == e.model_id) || arch != e.info.architecture || !std::equal(geo, geo + 4, our_geo))
    return invalid_argument("saved from another model (" + arch + " '" + name + "', identity " + model.hex().substr(0, 16) +
                            "), not " + e.params.model_path + " (" + e.info.architecture + " '" + e.info.name +
                            "', identity " + e.model_id.hex().substr(0, 16) + ")");
  if (with_mmproj) {
    if (!e.mmproj) return invalid_argument("its cache holds media encoded by an mmproj: load the same --mmproj");
    if (!(mm == e.mmproj_id))
      return invalid_argument("its media were encoded by another mmproj (identity " + mm.hex().substr(0, 16) + "), not " +
                              e.params.mmproj_path + " (identity " + e.mmproj_id.hex().substr(0, 16) + ")");
  }
  return Status::ok();
}

std::string method_section(const std::string& spec, uint64_t page_bytes) {
  std::string b;
  ByteWriter w(&b);
  w.str(spec);
  w.put<uint64_t>(page_bytes);
  return b;
}

Result<std::string> check_method_section(Engine::Impl& e, const uint8_t* data, size_t size, const std::string& kv_method) {
  ByteReader r(data, size);
  std::string spec = r.str(4096);
  const uint64_t page_bytes = r.get<uint64_t>();
  if (!r.ok() || !r.at_end()) return invalid_file("malformed method section");
  VLKV_ASSIGN_OR_RETURN(std::string want, canonical_method(e, kv_method));
  if (spec != want)
    return invalid_argument("it holds KV method " + spec + ", this session uses " + want + " (load it under " + spec +
                            ": --kv, or /kv in vlkv chat)");
  const uint64_t budget = e.kv->budget_bytes(), used = e.kv->bytes_in_use();
  if (page_bytes > budget - std::min(budget, used))
    return out_of_memory("its KV cache takes " + format_bytes(page_bytes) + ", more than the " +
                         format_bytes(budget - std::min(budget, used)) + " free of the KV budget of " +
                         format_bytes(budget) + " (raise --kv-budget)");
  return spec;
}

SessionHistory& SessionFile::history(Session& s) { return *s.history_; }

uint64_t SessionFile::max_file_bytes(const Engine::Impl& e) {
  // Pages are stored without their unused tails, so the codec bytes are below the budget;
  // token records take 45 bytes per token of the context; 64 MiB for the rest.
  const uint64_t n_ctx = static_cast<uint64_t>(std::max<int64_t>(0, e.params.n_ctx));
  return e.kv->budget_bytes() + n_ctx * 64 + (64ull << 20);
}

Result<uint64_t> SessionFile::write(const Session& s, const std::string* conversation, const std::string& path,
                                    const std::string* checkpoint) {
  Engine::Impl& e = *s.engine_;
  const SessionHistory& h = *s.history_;
  if (h.synthetic) return unsupported("this session's cache was filled with random rows for a benchmark: nothing to save");
  if (static_cast<int64_t>(h.ids.size()) != s.n_past_)
    return Status(StatusCode::kInternal, "the session's token record differs from its cache");
  std::string tokens;
  {
    ByteWriter w(&tokens);
    w.put<int64_t>(s.n_past_);
    w.put<int64_t>(s.next_pos_);
    w.vec(h.ids);
    w.vec(h.kinds);
    w.vec(h.pos);
    w.vec(h.mrope);
  }
  std::string media;
  {
    ByteWriter w(&media);
    w.put<uint64_t>(h.media.size());
    for (const MediaRecord& m : h.media) {
      w.put(m.hash);
      w.put(m.first_row);
      w.put(m.n_rows);
      w.put(m.grid_t);
      w.put(m.grid_h);
      w.put(m.grid_w);
    }
  }
  // The cache goes from its pages straight to the file (no copy of it in memory: a long video's
  // cache is the largest thing a run holds), under the engine's lock so no step changes it
  // meanwhile. Sessions are saved by the CLI's run and chat, which have no other session waiting.
  std::lock_guard<std::mutex> lock(e.forward_mutex);
  VLKV_ASSIGN_OR_RETURN(KvFileWriter f, KvFileWriter::create(path, 5 + (conversation ? 1 : 0) + (checkpoint ? 1 : 0)));
  // A checkpoint's media are not recorded until its prompt ends, but its rows hold their embeddings.
  VLKV_RETURN_IF_ERROR(f.add(kSectionIdentity, identity_section(e, !h.media.empty() || checkpoint != nullptr)));
  VLKV_RETURN_IF_ERROR(
      f.add(kSectionMethod, method_section(e.kv->sequence_method(s.seq_), e.kv->sequence_bytes(s.seq_))));
  VLKV_RETURN_IF_ERROR(f.add(kSectionTokens, tokens));
  VLKV_RETURN_IF_ERROR(f.add(kSectionMedia, media));
  VLKV_RETURN_IF_ERROR(f.add_streamed(kSectionKv, [&] { return e.kv->save_sequence(s.seq_, &f); }));
  if (conversation) VLKV_RETURN_IF_ERROR(f.add(kSectionConversation, *conversation));
  if (checkpoint) VLKV_RETURN_IF_ERROR(f.add(kSectionCheckpoint, *checkpoint));
  VLKV_RETURN_IF_ERROR(f.commit());
  return f.bytes();
}

Result<std::unique_ptr<Session>> SessionFile::load(Engine::Impl& e, const uint8_t* data, size_t size,
                                                   const std::string& kv_method, std::string* conversation,
                                                   std::string* checkpoint) {
  VLKV_ASSIGN_OR_RETURN(std::vector<KvFileSectionView> views, parse_kv_file(data, size));
  std::map<uint32_t, KvFileSectionView> sec;
  for (const KvFileSectionView& v : views) sec[v.id] = v;
  if (!checkpoint && sec.count(kSectionCheckpoint))
    return invalid_argument("an ingest checkpoint (a prompt's prefill cut at a frame), not a finished KV file: "
                            "continue it with vlkv run --resume and the same flags");
  for (uint32_t id : {kSectionIdentity, kSectionMethod, kSectionTokens, kSectionMedia, kSectionKv})
    if (!sec.count(id)) return invalid_file(std::string("no ") + kv_file_section_name(id) + " section");
  auto reader = [&](uint32_t id) { return ByteReader(sec[id].data, sec[id].size); };
  auto malformed = [](uint32_t id) { return invalid_file(std::string("malformed ") + kv_file_section_name(id) + " section"); };

  // identity: the same text model (and mmproj when the cache holds media embeddings)
  VLKV_RETURN_IF_ERROR(check_identity_section(e, sec[kSectionIdentity].data, sec[kSectionIdentity].size));
  // method: the one this session is to use, within the free budget
  VLKV_ASSIGN_OR_RETURN(std::string spec,
                        check_method_section(e, sec[kSectionMethod].data, sec[kSectionMethod].size, kv_method));
  SessionHistory h;
  int64_t n_past = 0, next_pos = 0;
  {  // tokens: one record per cached row, ids in the vocabulary, kinds valid
    ByteReader r = reader(kSectionTokens);
    n_past = r.get<int64_t>();
    next_pos = r.get<int64_t>();
    const uint64_t n_ctx = static_cast<uint64_t>(e.params.n_ctx);
    h.ids = r.vec<int32_t>(n_ctx);
    h.kinds = r.vec<uint8_t>(n_ctx);
    h.pos = r.vec<int64_t>(n_ctx);
    h.mrope = r.vec<int64_t>(3 * n_ctx);
    if (!r.ok() || !r.at_end()) return malformed(kSectionTokens);
    const size_t n = h.ids.size();
    if (n_past < 0 || static_cast<uint64_t>(n_past) != n || h.kinds.size() != n || h.pos.size() != n ||
        h.mrope.size() != 3 * n)
      return invalid_file("the tokens section's counts disagree");
    if (next_pos < 0 || next_pos > kMaxPosition)
      return invalid_file("the next position " + std::to_string(next_pos) + " is out of range");
    for (size_t i = 0; i < n; ++i)
      if (h.pos[i] < 0 || h.pos[i] > kMaxPosition || h.mrope[3 * i] < -1 || h.mrope[3 * i] > kMaxPosition ||
          h.mrope[3 * i + 1] < -1 || h.mrope[3 * i + 1] > kMaxPosition || h.mrope[3 * i + 2] < -1 ||
          h.mrope[3 * i + 2] > kMaxPosition)
        return invalid_file("token " + std::to_string(i) + " has a position out of range");
    if (n_past > e.params.n_ctx)
      return invalid_argument("it holds " + std::to_string(n_past) + " tokens, more than the context size of " +
                              std::to_string(e.params.n_ctx) + " (raise --ctx-size)");
    for (size_t i = 0; i < n; ++i)
      if (h.kinds[i] > static_cast<uint8_t>(TokenKind::kSpecial) || h.ids[i] < 0 || h.ids[i] >= e.hparams.n_vocab)
        return invalid_file("token " + std::to_string(i) + " has an invalid id or kind");
  }
  {  // media: rows within the cached ones
    ByteReader r = reader(kSectionMedia);
    const uint64_t n = r.count(kMaxMediaItems, 36);
    for (uint64_t i = 0; i < n && r.ok(); ++i) {
      MediaRecord m;
      m.hash = r.get<uint64_t>();
      m.first_row = r.get<int64_t>();
      m.n_rows = r.get<int64_t>();
      m.grid_t = r.get<int32_t>();
      m.grid_h = r.get<int32_t>();
      m.grid_w = r.get<int32_t>();
      if (m.first_row < 0 || m.n_rows <= 0 || m.first_row > n_past - m.n_rows) return malformed(kSectionMedia);
      h.media.push_back(m);
    }
    if (!r.ok() || !r.at_end()) return malformed(kSectionMedia);
  }
  if (checkpoint) {
    checkpoint->clear();
    if (sec.count(kSectionCheckpoint))
      checkpoint->assign(reinterpret_cast<const char*>(sec[kSectionCheckpoint].data), sec[kSectionCheckpoint].size);
  }
  if (conversation) {
    conversation->clear();
    if (sec.count(kSectionConversation))
      conversation->assign(reinterpret_cast<const char*>(sec[kSectionConversation].data), sec[kSectionConversation].size);
  }
  // Everything above checked: now the cache (which checks its own section whole before taking a page).
  std::lock_guard<std::mutex> lock(e.forward_mutex);
  VLKV_ASSIGN_OR_RETURN(SeqId seq, e.kv->load_sequence(spec, sec[kSectionKv].data, sec[kSectionKv].size));
  if (const int64_t n_kv = e.kv->n_tokens(seq); n_kv != n_past) {
    e.kv->remove_sequence(seq);
    return invalid_file("the KV section holds " + std::to_string(n_kv) + " tokens, the tokens section " +
                        std::to_string(n_past));
  }
  std::unique_ptr<Session> s(new Session(&e, seq));
  s->n_past_ = n_past;
  s->next_pos_ = next_pos;
  *s->history_ = std::move(h);
  return s;
}

Status Session::save_kv(const std::string& path) const {
  VLKV_RETURN_IF_ERROR(check_writable_file(path));  // before the encode, not after it
  if (Result<uint64_t> st = SessionFile::write(*this, nullptr, path); !st.is_ok())
    return st.status().with_context("saving the KV cache to " + path);
  return Status::ok();
}

Result<std::unique_ptr<Session>> Engine::load_session(const std::string& path, const std::string& kv_method) {
  VLKV_ASSIGN_OR_RETURN(std::vector<uint8_t> data, read_kv_file(path, SessionFile::max_file_bytes(*impl_)));
  Result<std::unique_ptr<Session>> s = SessionFile::load(*impl_, data.data(), data.size(), kv_method, nullptr);
  if (!s.is_ok()) return Status(s.status().code(), path + ": " + s.status().message());
  return s;
}

}  // namespace vlkv
