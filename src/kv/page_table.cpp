#include "kv/page_table.h"

#include <cstring>

#include "base/check.h"

namespace vlkv {

PageTable::~PageTable() {
  for (auto& [id, seq] : seqs_) release(seq);
}

SeqId PageTable::add(SequenceCache seq) {
  const SeqId id = next_id_++;
  seqs_.emplace(id, std::move(seq));
  return id;
}

void PageTable::release(SequenceCache& seq) {
  // An uncommitted step: pages of the tree include new_pages; deferred ones left the tree.
  for (auto& layer : seq.layers) layer.for_each_page([&](PageId p) { pool_.free(p); });
  for (PageId p : seq.pending.deferred_free) pool_.free(p);
  // Pages that only a snapshot still references were moved to deferred_free, so
  // snapshots need no freeing of their own.
  seq.layers.clear();
  seq.pending = PendingStep{};
}

void PageTable::remove(SeqId seq) {
  auto it = seqs_.find(seq);
  VLKV_CHECK_MSG(it != seqs_.end(), "remove of an unknown sequence");
  release(it->second);
  seqs_.erase(it);
}

SequenceCache* PageTable::find(SeqId seq) {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second;
}

const SequenceCache* PageTable::find(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second;
}

std::vector<SeqId> PageTable::ids() const {
  std::vector<SeqId> out;
  for (const auto& [id, s] : seqs_) out.push_back(id);
  return out;
}

uint64_t PageTable::n_bytes(SeqId seq) const {
  const SequenceCache* s = find(seq);
  VLKV_CHECK_MSG(s != nullptr, "unknown sequence id");
  uint64_t n = 0;
  for (PageId p : s->pending.deferred_free) n += pool_.size_of(p);
  for (const auto& layer : s->layers) layer.for_each_page([&](PageId p) { n += pool_.size_of(p); });
  return n;
}

int64_t PageTable::n_pages(SeqId seq) const {
  const SequenceCache* s = find(seq);
  VLKV_CHECK(s != nullptr);
  int64_t n = static_cast<int64_t>(s->pending.deferred_free.size());
  for (const auto& layer : s->layers) layer.for_each_page([&](PageId) { ++n; });
  return n;
}

// Copies one stream's pages into fresh pages; on failure frees what it took.
static Status copy_stream(PagePool& pool, Stream& s) {
  for (size_t i = 0; i < s.pages.size(); ++i) {
    if (s.pages[i] == kNoPage) continue;  // freed (left a sliding window): stays freed in the copy
    Result<PageId> page = pool.allocate(pool.size_of(s.pages[i]));
    if (!page.is_ok()) {
      for (size_t j = 0; j < i; ++j)
        if (s.pages[j] != kNoPage) pool.free(s.pages[j]);
      s.pages.clear();
      s.page_data.clear();
      return page.status();
    }
    uint8_t* dst = pool.data(*page);
    std::memcpy(dst, s.page_data[i], pool.size_of(s.pages[i]));
    s.pages[i] = *page;
    s.page_data[i] = dst;
  }
  return Status::ok();
}

Status PageTable::copy(SeqId src_id, SeqId dst_id) {
  SequenceCache* src = find(src_id);
  SequenceCache* dst = find(dst_id);
  if (!src || !dst) return invalid_argument("copy_sequence: unknown sequence");
  if (src_id == dst_id) return Status::ok();
  if (src->pending.active() || dst->pending.active())
    return invalid_argument("copy_sequence: a sequence has an uncommitted step (commit or roll back first)");
  SequenceCache copy;
  copy.method = src->method;
  copy.n_tokens = src->n_tokens;
  if (src->state) copy.state = src->state->clone();
  for (const auto& layer : src->layers) copy.layers.push_back(layer.clone_meta());
  // Streams still pointing at src pages are cleared on failure before release(copy).
  Status status;
  for (auto& layer : copy.layers)
    for (auto& head : layer.heads)
      for (auto& seg : head.segments) {
        for (Stream* s : {&seg.k, &seg.v}) {
          if (status.is_ok()) {
            status = copy_stream(pool_, *s);
          } else {
            s->pages.clear();
            s->page_data.clear();
          }
        }
      }
  if (!status.is_ok()) {
    release(copy);
    return status.with_context("copying sequence " + std::to_string(src_id));
  }
  release(*dst);
  *dst = std::move(copy);
  return Status::ok();
}

}  // namespace vlkv
