#include "engine/prefix_blob.h"

#include <algorithm>
#include <map>

#include "engine/content_hash.h"
#include "engine/kv_file.h"
#include "engine/kv_save.h"
#include "kv/kv_bytes.h"

namespace vlkv {
namespace {

std::string rows_section(int64_t chunk, std::span<const RowKey> rows) {
  std::string b;
  ByteWriter w(&b);
  w.put<int64_t>(chunk);
  w.put<uint64_t>(rows.size());
  for (const RowKey& r : rows) {
    w.put(r.a);
    w.put(r.b);
  }
  return b;
}

}  // namespace

std::string prefix_entry_key(const Engine::Impl& e, const std::string& method, int64_t chunk,
                             std::span<const RowKey> rows) {
  Sha256 h;
  h.update_string("vlkv prefix entry v1");
  h.update_value(e.model_id.hi);
  h.update_value(e.model_id.lo);
  h.update_value(e.mmproj_id.hi);
  h.update_value(e.mmproj_id.lo);
  h.update_string(method);
  const std::string r = rows_section(chunk, rows);
  h.update(r.data(), r.size());
  return "vlkv:prefix:" + h.finish128().hex();
}

Result<std::string> prefix_entry_image(Engine::Impl& e, SeqId seq, const std::string& method, int64_t chunk,
                                       std::span<const RowKey> rows) {
  std::string kv_bytes;
  VLKV_RETURN_IF_ERROR(e.kv->save_sequence(seq, &kv_bytes));
  std::vector<KvFileSection> sections;
  sections.push_back({kSectionIdentity, identity_section(e, /*with_mmproj=*/true)});
  sections.push_back({kSectionMethod, method_section(method, e.kv->sequence_bytes(seq))});
  sections.push_back({kSectionPrefixRows, rows_section(chunk, rows)});
  sections.push_back({kSectionKv, std::move(kv_bytes)});
  return build_kv_file(sections);
}

Result<SeqId> load_prefix_entry(Engine::Impl& e, const std::string& image, const std::string& method, int64_t chunk,
                                std::span<const RowKey> rows) {
  VLKV_ASSIGN_OR_RETURN(std::vector<KvFileSectionView> views,
                        parse_kv_file(reinterpret_cast<const uint8_t*>(image.data()), image.size()));
  std::map<uint32_t, KvFileSectionView> sec;
  for (const KvFileSectionView& v : views) sec[v.id] = v;
  for (uint32_t id : {kSectionIdentity, kSectionMethod, kSectionPrefixRows, kSectionKv})
    if (!sec.count(id)) return invalid_file(std::string("no ") + kv_file_section_name(id) + " section");
  VLKV_RETURN_IF_ERROR(check_identity_section(e, sec[kSectionIdentity].data, sec[kSectionIdentity].size));
  VLKV_ASSIGN_OR_RETURN(std::string spec, check_method_section(e, sec[kSectionMethod].data, sec[kSectionMethod].size, method));
  const std::string want = rows_section(chunk, rows);
  const KvFileSectionView& got = sec[kSectionPrefixRows];
  if (got.size != want.size() || !std::equal(want.begin(), want.end(), reinterpret_cast<const char*>(got.data)))
    return invalid_file("it holds other rows than its key names");
  VLKV_ASSIGN_OR_RETURN(SeqId seq, e.kv->load_sequence(spec, sec[kSectionKv].data, sec[kSectionKv].size));
  if (e.kv->n_tokens(seq) != static_cast<int64_t>(rows.size())) {
    e.kv->remove_sequence(seq);
    return invalid_file("its KV section holds another number of tokens than its rows");
  }
  return seq;
}

}  // namespace vlkv
