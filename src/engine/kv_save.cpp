// Session::save_kv, Engine::load_session: a session's sections of a KV file (docs/kv_file.md).
#include "engine/kv_save.h"

#include <zlib.h>

#include <cstdio>
#include <map>

#include "engine/content_hash.h"
#include "engine/kv_file.h"
#include "kv/kv_bytes.h"
#include "kv/page_pool.h"

namespace vlkv {
namespace {

constexpr uint64_t kTensorSampleBytes = 4096;

// A GGUF file's identity: the CRC32 of its header (metadata and tensor table, every byte before
// the tensor data) and of the first kTensorSampleBytes of each tensor's data, the header's
// length, the file's size and the tensor-table fingerprint.
struct GgufIdentity {
  uint32_t header_crc = 0;
  uint64_t header_bytes = 0, file_size = 0, fingerprint = 0;
  bool operator==(const GgufIdentity&) const = default;
  void put(ByteWriter& w) const {
    w.put(header_crc);
    w.put(header_bytes);
    w.put(file_size);
    w.put(fingerprint);
  }
  static GgufIdentity get(ByteReader& r) {
    GgufIdentity id;
    id.header_crc = r.get<uint32_t>();
    id.header_bytes = r.get<uint64_t>();
    id.file_size = r.get<uint64_t>();
    id.fingerprint = r.get<uint64_t>();
    return id;
  }
};

Result<GgufIdentity> gguf_identity(const GgufFile& g, uint64_t fingerprint) {
  GgufIdentity id;
  id.header_bytes = g.data_offset();
  id.file_size = g.file_size();
  id.fingerprint = fingerprint;
  std::FILE* f = std::fopen(g.path().c_str(), "rb");
  if (!f) return io_error(g.path() + ": cannot read it again to identify the model");
  std::vector<uint8_t> head(static_cast<size_t>(std::min<uint64_t>(id.header_bytes, g.file_size())));
  const bool ok = std::fread(head.data(), 1, head.size(), f) == head.size();
  std::fclose(f);
  if (!ok) return io_error(g.path() + ": cannot read its header again to identify the model");
  uLong c = crc32(crc32(0L, Z_NULL, 0), head.data(), static_cast<uInt>(head.size()));
  // Weights retrained on the same layout share the header: the first bytes of every tensor
  // tell them apart at the cost of a few pages per tensor (hashing every weight would cost
  // seconds per GB on each save and load).
  for (const GgufTensorInfo& t : g.tensors())
    if (t.data) c = crc32(c, t.data, static_cast<uInt>(std::min<uint64_t>(t.n_bytes, kTensorSampleBytes)));
  id.header_crc = static_cast<uint32_t>(c);
  return id;
}

std::string hex32(uint32_t x) {
  char b[16];
  std::snprintf(b, sizeof b, "%08x", x);
  return b;
}

// The canonical spec of a method spec ("": the engine's), as the cache stores sequences with it.
Result<std::string> canonical_method(Engine::Impl& e, const std::string& spec) {
  KvCache& kv = *e.kv;
  VLKV_ASSIGN_OR_RETURN(SeqId probe, kv.add_sequence(spec));
  const std::string canonical = kv.sequence_method(probe);
  kv.remove_sequence(probe);
  return canonical;
}

constexpr uint64_t kMaxMediaItems = 1 << 20;

}  // namespace

uint64_t media_content_hash(const MediaItem& item) {
  Sha256 h;  // the prefix cache's digest (content_hash.h): two different pictures never share a hash
  h.update_value(static_cast<uint8_t>(item.is_video ? 1 : 0));
  h.update_value(item.fps);
  for (const Image& f : item.frames) {
    h.update_value(f.width);
    h.update_value(f.height);
    h.update(f.pixels.data(), f.pixels.size());
  }
  return h.finish128().hi;
}

SessionHistory& SessionFile::history(Session& s) { return *s.history_; }

uint64_t SessionFile::max_file_bytes(const Engine::Impl& e) {
  // Pages are stored without their unused tails, so the codec bytes are below the budget;
  // token records take 45 bytes per token of the context; 64 MiB for the rest.
  const uint64_t n_ctx = static_cast<uint64_t>(std::max<int64_t>(0, e.params.n_ctx));
  return e.kv->budget_bytes() + n_ctx * 64 + (64ull << 20);
}

Result<std::string> SessionFile::image(const Session& s, const std::string* conversation) {
  Engine::Impl& e = *s.engine_;
  const SessionHistory& h = *s.history_;
  if (h.synthetic) return unsupported("this session's cache was filled with random rows for a benchmark: nothing to save");
  if (static_cast<int64_t>(h.ids.size()) != s.n_past_)
    return Status(StatusCode::kInternal, "the session's token record differs from its cache");
  std::vector<KvFileSection> sections;
  {  // identity
    VLKV_ASSIGN_OR_RETURN(GgufIdentity model, gguf_identity(*e.gguf, e.info.fingerprint));
    std::string b;
    ByteWriter w(&b);
    w.str(e.info.architecture);
    w.str(e.info.name);
    model.put(w);
    w.put<uint32_t>(static_cast<uint32_t>(e.hparams.n_layers));
    w.put<uint32_t>(static_cast<uint32_t>(e.hparams.n_heads));
    w.put<uint32_t>(static_cast<uint32_t>(e.hparams.n_kv_heads));
    w.put<uint32_t>(static_cast<uint32_t>(e.hparams.head_dim));
    // The mmproj matters only when its embeddings are in the cache.
    const bool with_mmproj = !h.media.empty() && e.mmproj;
    w.put<uint8_t>(with_mmproj ? 1 : 0);
    if (with_mmproj) {
      VLKV_ASSIGN_OR_RETURN(GgufIdentity mm, gguf_identity(*e.mmproj, 0));
      mm.put(w);
    }
    sections.push_back({kSectionIdentity, std::move(b)});
  }
  std::string kv_bytes;
  std::string spec;
  uint64_t page_bytes = 0;
  {
    std::lock_guard<std::mutex> lock(e.forward_mutex);
    VLKV_RETURN_IF_ERROR(e.kv->save_sequence(s.seq_, &kv_bytes));
    spec = e.kv->sequence_method(s.seq_);
    page_bytes = e.kv->sequence_bytes(s.seq_);
  }
  {
    std::string b;
    ByteWriter w(&b);
    w.str(spec);
    w.put<uint64_t>(page_bytes);
    sections.push_back({kSectionMethod, std::move(b)});
  }
  {
    std::string b;
    ByteWriter w(&b);
    w.put<int64_t>(s.n_past_);
    w.put<int64_t>(s.next_pos_);
    w.vec(h.ids);
    w.vec(h.kinds);
    w.vec(h.pos);
    w.vec(h.mrope);
    sections.push_back({kSectionTokens, std::move(b)});
  }
  {
    std::string b;
    ByteWriter w(&b);
    w.put<uint64_t>(h.media.size());
    for (const MediaRecord& m : h.media) {
      w.put(m.hash);
      w.put(m.first_row);
      w.put(m.n_rows);
      w.put(m.grid_t);
      w.put(m.grid_h);
      w.put(m.grid_w);
    }
    sections.push_back({kSectionMedia, std::move(b)});
  }
  sections.push_back({kSectionKv, std::move(kv_bytes)});
  if (conversation) sections.push_back({kSectionConversation, *conversation});
  return build_kv_file(sections);
}

Result<std::unique_ptr<Session>> SessionFile::load(Engine::Impl& e, const uint8_t* data, size_t size,
                                                   const std::string& kv_method, std::string* conversation) {
  VLKV_ASSIGN_OR_RETURN(std::vector<KvFileSectionView> views, parse_kv_file(data, size));
  std::map<uint32_t, KvFileSectionView> sec;
  for (const KvFileSectionView& v : views) sec[v.id] = v;
  for (uint32_t id : {kSectionIdentity, kSectionMethod, kSectionTokens, kSectionMedia, kSectionKv})
    if (!sec.count(id)) return invalid_file(std::string("no ") + kv_file_section_name(id) + " section");
  auto reader = [&](uint32_t id) { return ByteReader(sec[id].data, sec[id].size); };
  auto malformed = [](uint32_t id) { return invalid_file(std::string("malformed ") + kv_file_section_name(id) + " section"); };

  {  // identity: the same text model (and mmproj when the cache holds media embeddings)
    ByteReader r = reader(kSectionIdentity);
    const std::string arch = r.str(256), name = r.str(4096);
    const GgufIdentity model = GgufIdentity::get(r);
    uint32_t geo[4];
    for (uint32_t& x : geo) x = r.get<uint32_t>();
    const uint8_t with_mmproj = r.get<uint8_t>();
    const GgufIdentity mm = with_mmproj == 1 ? GgufIdentity::get(r) : GgufIdentity{};
    if (!r.ok() || !r.at_end() || with_mmproj > 1) return malformed(kSectionIdentity);
    VLKV_ASSIGN_OR_RETURN(GgufIdentity ours, gguf_identity(*e.gguf, e.info.fingerprint));
    const uint32_t our_geo[4] = {static_cast<uint32_t>(e.hparams.n_layers), static_cast<uint32_t>(e.hparams.n_heads),
                                 static_cast<uint32_t>(e.hparams.n_kv_heads), static_cast<uint32_t>(e.hparams.head_dim)};
    if (!(model == ours) || arch != e.info.architecture || !std::equal(geo, geo + 4, our_geo))
      return invalid_argument("saved from another model (" + arch + " '" + name + "', identity crc " +
                              hex32(model.header_crc) + "), not " + e.params.model_path + " (" +
                              e.info.architecture + " '" + e.info.name + "', identity crc " + hex32(ours.header_crc) + ")");
    if (with_mmproj) {
      if (!e.mmproj) return invalid_argument("its cache holds media encoded by an mmproj: load the same --mmproj");
      VLKV_ASSIGN_OR_RETURN(GgufIdentity our_mm, gguf_identity(*e.mmproj, 0));
      if (!(mm == our_mm))
        return invalid_argument("its media were encoded by another mmproj (identity crc " + hex32(mm.header_crc) +
                                "), not " + e.params.mmproj_path + " (identity crc " + hex32(our_mm.header_crc) + ")");
    }
  }
  std::string spec;
  {  // method: the one this session is to use
    ByteReader r = reader(kSectionMethod);
    spec = r.str(4096);
    const uint64_t page_bytes = r.get<uint64_t>();
    if (!r.ok() || !r.at_end()) return malformed(kSectionMethod);
    VLKV_ASSIGN_OR_RETURN(std::string want, canonical_method(e, kv_method));
    if (spec != want)
      return invalid_argument("it holds KV method " + spec + ", this session uses " + want + " (load it under " +
                              spec + ": --kv, or /kv in vlkv chat)");
    const uint64_t budget = e.kv->budget_bytes(), used = e.kv->bytes_in_use();
    if (page_bytes > budget - std::min(budget, used))
      return out_of_memory("its KV cache takes " + format_bytes(page_bytes) + ", more than the " +
                           format_bytes(budget - std::min(budget, used)) + " free of the KV budget of " +
                           format_bytes(budget) + " (raise --kv-budget)");
  }
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
        h.mrope.size() != 3 * n || next_pos < 0)
      return invalid_file("the tokens section's counts disagree");
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
  Result<std::string> image = SessionFile::image(*this, nullptr);
  if (!image.is_ok()) return image.status().with_context("saving the KV cache to " + path);
  return write_kv_file(path, *image);
}

Result<std::unique_ptr<Session>> Engine::load_session(const std::string& path, const std::string& kv_method) {
  VLKV_ASSIGN_OR_RETURN(std::vector<uint8_t> data, read_kv_file(path, SessionFile::max_file_bytes(*impl_)));
  Result<std::unique_ptr<Session>> s = SessionFile::load(*impl_, data.data(), data.size(), kv_method, nullptr);
  if (!s.is_ok()) return Status(s.status().code(), path + ": " + s.status().message());
  return s;
}

}  // namespace vlkv
