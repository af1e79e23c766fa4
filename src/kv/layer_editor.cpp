#include "kv/layer_editor.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"

namespace vlkv {

std::vector<int> LayerEditor::visible(int kv_head) const {
  const auto& segs = layer_.heads[kv_head].segments;
  std::vector<int> idx;
  idx.reserve(segs.size());
  for (size_t i = 0; i < segs.size(); ++i)
    if (space_ == 0 || segs[i].space == space_) idx.push_back(static_cast<int>(i));
  return idx;
}

int LayerEditor::real_index(int kv_head, int seg) const {
  if (space_ == 0) return seg;
  const std::vector<int> idx = visible(kv_head);
  VLKV_CHECK_MSG(seg >= 0 && seg < static_cast<int>(idx.size()), "segment index outside the editor's view");
  return idx[static_cast<size_t>(seg)];
}

int LayerEditor::add_segment(int kv_head, const Codec* k_codec, const Codec* v_codec, uint32_t tag, bool reread) {
  VLKV_CHECK(v_codec != nullptr);
  if (!store_k_) k_codec = nullptr;
  // Each stream's pages hold as many whole blocks as fit the pool's page size (at least
  // one), with no unused end: a stream wastes less than one page, at its tail.
  const uint32_t page_bytes = pool_.page_bytes();
  Segment seg;
  seg.tag = tag;
  seg.space = space_;
  seg.reread = reread;
  for (auto [s, c] : {std::pair{&seg.k, k_codec}, std::pair{&seg.v, v_codec}}) {
    if (!c) continue;
    s->codec = c;
    s->block_bytes = static_cast<int32_t>(c->block_bytes(head_dim_));
    s->blocks_per_page = std::max<int32_t>(1, static_cast<int32_t>(page_bytes / static_cast<uint32_t>(s->block_bytes)));
  }
  const int visible_index = static_cast<int>(visible(kv_head).size());
  layer_.heads[kv_head].segments.push_back(std::move(seg));
  return visible_index;
}

Status LayerEditor::append_stream(Stream& s, int64_t first_token, const float* x, int64_t row_stride,
                                  int64_t n_tokens) {
  const int tpb = s.codec->tokens_per_block();
  VLKV_CHECK_MSG(first_token % tpb == 0 && n_tokens % tpb == 0, "append of a partial block");
  const int64_t first_block = first_token / tpb;
  for (int64_t b = 0; b < n_tokens / tpb; ++b) {
    const int64_t g = first_block + b;
    const size_t page = static_cast<size_t>(g / s.blocks_per_page);
    if (page == s.pages.size()) {
      VLKV_ASSIGN_OR_RETURN(PageId id, pool_.allocate(s.page_bytes()));
      pending_.new_pages.push_back(id);
      s.pages.push_back(id);
      s.page_data.push_back(pool_.data(id));
    }
    uint8_t* block = s.page_data[page] + (g % s.blocks_per_page) * static_cast<int64_t>(s.block_bytes);
    s.codec->encode(x + b * tpb * row_stride, row_stride, head_dim_, block);
  }
  return Status::ok();
}

Status LayerEditor::append(int kv_head, int seg_index, const float* k, const float* v, int64_t row_stride,
                           int64_t n_tokens) {
  Segment& seg = layer_.heads[kv_head].segments[real_index(kv_head, seg_index)];
  if (seg.k.present()) VLKV_RETURN_IF_ERROR(append_stream(seg.k, seg.n_tokens, k, row_stride, n_tokens));
  VLKV_RETURN_IF_ERROR(append_stream(seg.v, seg.n_tokens, v, row_stride, n_tokens));
  seg.n_tokens += n_tokens;
  return Status::ok();
}

void read_stream(const Stream& s, int64_t first, int64_t n, int head_dim, float* x) {
  const int tpb = s.codec->tokens_per_block();
  std::vector<float> block(static_cast<size_t>(tpb) * head_dim);  // [tokens_per_block, head_dim]
  const SegmentView view = s.view(0, first + n + (tpb - (first + n) % tpb) % tpb, head_dim);
  for (int64_t t = first - first % tpb; t < first + n; t += tpb) {
    if (s.pages[static_cast<size_t>(t / tpb / s.blocks_per_page)] == kNoPage) continue;
    s.codec->decode(view.block(t / tpb), head_dim, block.data());
    for (int r = 0; r < tpb; ++r) {
      const int64_t tok = t + r;
      if (tok < first || tok >= first + n) continue;
      std::memcpy(x + (tok - first) * head_dim, block.data() + static_cast<size_t>(r) * head_dim,
                  sizeof(float) * head_dim);
    }
  }
}

void LayerEditor::read(int kv_head, int seg_index, int64_t first, int64_t n, float* k, float* v) const {
  const Segment& seg = layer_.heads[kv_head].segments[real_index(kv_head, seg_index)];
  VLKV_CHECK(first >= 0 && first + n <= seg.n_tokens);
  VLKV_CHECK_MSG((!k || !seg.k.present() || seg.k.live(first, n)) && (!v || seg.v.live(first, n)),
                 "read of tokens whose pages were freed (left the sliding window); mark the segment reread");
  if (k && seg.k.present()) read_stream(seg.k, first, n, head_dim_, k);
  if (v) read_stream(seg.v, first, n, head_dim_, v);
}

void LayerEditor::release_page(PageId p) {
  auto it = std::find(pending_.new_pages.begin(), pending_.new_pages.end(), p);
  if (it != pending_.new_pages.end()) {  // taken in this step: no snapshot refers to it
    pending_.new_pages.erase(it);
    pool_.free(p);
  } else {
    pending_.deferred_free.push_back(p);  // the last-commit snapshot may still need it
  }
}

void LayerEditor::release_stream(Stream& s) {
  for (PageId p : s.pages)
    if (p != kNoPage) release_page(p);
  s.pages.clear();
  s.page_data.clear();
  s.n_freed_pages = 0;
}

void LayerEditor::free_page(int kv_head, int visible_index, bool k_stream, size_t page) {
  Segment& seg = layer_.heads[kv_head].segments[real_index(kv_head, visible_index)];
  Stream& s = k_stream ? seg.k : seg.v;
  VLKV_CHECK(s.present() && page < s.pages.size() && s.pages[page] != kNoPage);
  VLKV_CHECK_MSG(static_cast<int64_t>(page + 1) * s.tokens_per_page() <= seg.n_tokens, "free of a page not yet full");
  release_page(s.pages[page]);
  s.pages[page] = kNoPage;
  s.page_data[page] = nullptr;
  ++s.n_freed_pages;
}

void LayerEditor::remove_segment(int kv_head, int visible_index) {
  const int seg_index = real_index(kv_head, visible_index);
  auto& segs = layer_.heads[kv_head].segments;
  release_stream(segs[seg_index].k);
  release_stream(segs[seg_index].v);
  segs.erase(segs.begin() + seg_index);
}

void LayerEditor::remove_k(int kv_head, int visible_index) {
  Segment& seg = layer_.heads[kv_head].segments[real_index(kv_head, visible_index)];
  if (!seg.k.present()) return;
  release_stream(seg.k);
  seg.k = Stream{};
}

}  // namespace vlkv
