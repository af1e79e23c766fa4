#include "kv/kv_sequence_io.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kv/kv_bytes.h"
#include "kv/method.h"

namespace vlkv {
namespace {

constexpr uint32_t kMaxSegmentsPerHead = 1 << 16;
// The fewest bytes a segment takes: tag, space, tokens, reread (17), an absent K stream (1) and
// a V stream of an empty codec name and no pages (present, index, name length, blocks per
// page, block bytes, page count: 29).
constexpr size_t kMinSegmentBytes = 17 + 1 + 29;
constexpr uint64_t kMaxStateBytes = uint64_t{1} << 32;

// The blocks in a page of a stream whose blocks take block_bytes (LayerEditor::add_segment).
int32_t blocks_per_page(const PagePool& pool, int32_t block_bytes) {
  return std::max<int32_t>(1, static_cast<int32_t>(pool.page_bytes() / static_cast<uint32_t>(block_bytes)));
}

// A state's bytes, length-prefixed so the reader can check it consumed exactly them.
bool put_state(ByteWriter& w, const LayerState* state) {
  w.put<uint8_t>(state ? 1 : 0);
  if (!state) return true;
  std::string bytes;
  ByteWriter sw(&bytes);
  if (!state->save(sw)) return false;
  w.str(bytes);
  return true;
}

Status unsupported_state(const Method& m, const std::string& which) {
  return unsupported("KV method " + m.spec() + ": its " + which +
                     " state cannot be saved to a file yet (saving would not decode the same)");
}

// Pages of one stream in file order: live ones hold their blocks' bytes (pointing into the input).
struct StreamPlan {
  std::vector<const uint8_t*> data;  // [n_pages] null: a page freed (out of a sliding window)
  std::vector<size_t> used;          // [n_pages] bytes of blocks in the page
};

// A segment without K takes its keys from the same segment of the layer whose queries and keys
// its layer shares (LayerPlan::score_layer): that segment must exist, hold K and as many tokens,
// under the plans of the sequence's next decode step and next longer step alike (a method may
// plan them apart, as Q Cache's prefill grouping does until it freezes). Attention checks the
// same before it reads (attn::build_chunks), so a file that breaks it would stop the process.
bool keys_have_sources(const SequenceCache& seq, const Method& method) {
  for (int n_new : {1, 2})
    for (size_t l = 0; l < seq.layers.size(); ++l) {
      const LayerPlan plan = plan_for_step(method, static_cast<int>(l), seq.state.get(), n_new);
      const bool shares = plan.score_layer >= 0 && plan.score_layer != static_cast<int>(l) &&
                          plan.score_layer < static_cast<int>(seq.layers.size());
      for (size_t h = 0; h < seq.layers[l].heads.size(); ++h) {
        const std::vector<Segment>& segs = seq.layers[l].heads[h].segments;
        for (size_t i = 0; i < segs.size(); ++i) {
          if (segs[i].k.present()) continue;
          if (!shares) return false;
          const std::vector<Segment>& src = seq.layers[static_cast<size_t>(plan.score_layer)].heads[h].segments;
          if (i >= src.size() || !src[i].k.present() || src[i].n_tokens != segs[i].n_tokens) return false;
        }
      }
    }
  return true;
}

Status save_into(const SequenceCache& seq, const KvGeometry& g, ByteWriter& w) {
  if (seq.pending.active()) return Status(StatusCode::kInternal, "save: the sequence has an uncommitted step");
  const Method& m = *seq.method;
  const std::vector<const Codec*> codecs = m.codecs();
  w.put<uint32_t>(static_cast<uint32_t>(g.n_layers));
  w.put<uint32_t>(static_cast<uint32_t>(g.n_kv_heads));
  w.put<uint32_t>(static_cast<uint32_t>(g.head_dim));
  w.put<int64_t>(seq.n_tokens);
  for (const LayerCache& lc : seq.layers) {
    w.put<int64_t>(lc.n_tokens);
    for (const HeadCache& h : lc.heads) {
      w.put<uint32_t>(static_cast<uint32_t>(h.segments.size()));
      for (const Segment& s : h.segments) {
        w.put<uint32_t>(s.tag);
        w.put<uint32_t>(s.space);
        w.put<int64_t>(s.n_tokens);
        w.put<uint8_t>(s.reread ? 1 : 0);
        for (const Stream* st : {&s.k, &s.v}) {
          w.put<uint8_t>(st->present() ? 1 : 0);
          if (!st->present()) continue;
          const auto it = std::find(codecs.begin(), codecs.end(), st->codec);
          if (it == codecs.end())
            return Status(StatusCode::kInternal, "save: codec " + st->codec->name() + " is not among the method's");
          w.put<uint32_t>(static_cast<uint32_t>(it - codecs.begin()));
          w.str(st->codec->name());
          w.put<int32_t>(st->blocks_per_page);
          w.put<int32_t>(st->block_bytes);
          const int64_t n_blocks = s.n_tokens / st->codec->tokens_per_block();
          w.put<uint64_t>(st->pages.size());
          for (size_t p = 0; p < st->pages.size(); ++p) {
            const bool live = st->pages[p] != kNoPage;
            w.put<uint8_t>(live ? 1 : 0);
            if (!live) continue;
            const int64_t first = static_cast<int64_t>(p) * st->blocks_per_page;
            const int64_t n = std::min<int64_t>(st->blocks_per_page, n_blocks - first);
            w.bytes(st->page_data[p], static_cast<size_t>(n) * static_cast<size_t>(st->block_bytes));
          }
        }
      }
    }
    if (!put_state(w, lc.state.get())) return unsupported_state(m, "per-layer");
  }
  if (!put_state(w, seq.state.get())) return unsupported_state(m, "per-sequence");
  return Status::ok();
}

}  // namespace

Status save_sequence_cache(const SequenceCache& seq, const KvGeometry& g, std::string* out) {
  ByteWriter w(out);
  return save_into(seq, g, w);
}

Status save_sequence_cache(const SequenceCache& seq, const KvGeometry& g, ByteSink* out) {
  ByteWriter w(out);
  return save_into(seq, g, w);
}

Status load_sequence_cache(const uint8_t* data, size_t size, const Method& method, const KvGeometry& g,
                           int64_t max_tokens, PagePool& pool, SequenceCache* out) {
  auto bad = [](const std::string& what) { return invalid_file("KV section: " + what); };
  ByteReader r(data, size);
  const uint32_t n_layers = r.get<uint32_t>(), n_kv = r.get<uint32_t>(), head_dim = r.get<uint32_t>();
  if (!r.ok()) return bad("truncated");
  if (n_layers != static_cast<uint32_t>(g.n_layers) || n_kv != static_cast<uint32_t>(g.n_kv_heads) ||
      head_dim != static_cast<uint32_t>(g.head_dim))
    return bad("geometry " + std::to_string(n_layers) + "x" + std::to_string(n_kv) + "x" + std::to_string(head_dim) +
               " differs from the model's");
  SequenceCache seq;
  seq.method = &method;
  seq.n_tokens = r.get<int64_t>();
  if (!r.ok() || seq.n_tokens < 0 || seq.n_tokens > max_tokens)
    return bad("token count " + std::to_string(seq.n_tokens) + " out of range");
  // States: the method's fresh ones, loaded from their bytes (present exactly where the method keeps one).
  auto load_state = [&](std::unique_ptr<LayerState> fresh, const LayerCache* layer,
                        std::unique_ptr<LayerState>* dst) -> bool {
    const uint8_t has = r.get<uint8_t>();
    if (!r.ok() || has > 1 || (has == 1) != (fresh != nullptr)) return false;
    if (!fresh) return true;
    const uint64_t n = r.count(kMaxStateBytes, 1);
    const uint8_t* p = r.take(n);
    if (!p) return false;
    ByteReader sr(p, n);
    if (!fresh->load(sr, layer) || !sr.ok() || !sr.at_end()) return false;
    *dst = std::move(fresh);
    return true;
  };
  const std::vector<const Codec*> codecs = method.codecs();
  std::vector<StreamPlan> plans;   // one per present stream, in file order
  std::vector<Stream*> streams;    // where each goes (pointers into seq.layers, stable once sized)
  uint64_t need = 0;               // page bytes the sequence takes
  seq.layers.resize(g.n_layers);
  for (int l = 0; l < g.n_layers; ++l) {
    LayerCache& lc = seq.layers[l];
    lc.n_tokens = r.get<int64_t>();
    if (!r.ok() || lc.n_tokens != seq.n_tokens)
      return bad("layer " + std::to_string(l) + " holds " + std::to_string(lc.n_tokens) + " tokens, not " +
                 std::to_string(seq.n_tokens));
    lc.heads.resize(g.n_kv_heads);
    for (int h = 0; h < g.n_kv_heads; ++h) {
      const uint32_t n_segs = r.get<uint32_t>();
      // Each segment takes at least kMinSegmentBytes of the section: a count the bytes left
      // cannot hold is refused before the segments are allocated.
      if (!r.ok() || n_segs > kMaxSegmentsPerHead || n_segs > r.left() / kMinSegmentBytes)
        return bad("segment count " + std::to_string(n_segs) + " out of range (" + std::to_string(r.left()) +
                   " bytes left)");
      lc.heads[h].segments.resize(n_segs);
      int64_t head_tokens = 0;
      for (Segment& s : lc.heads[h].segments) {
        s.tag = r.get<uint32_t>();
        s.space = r.get<uint32_t>();
        s.n_tokens = r.get<int64_t>();
        const uint8_t reread = r.get<uint8_t>();
        if (!r.ok() || s.n_tokens < 0 || s.n_tokens > seq.n_tokens || reread > 1) return bad("malformed segment");
        s.reread = reread == 1;
        head_tokens += s.n_tokens;
        for (Stream* st : {&s.k, &s.v}) {
          const uint8_t present = r.get<uint8_t>();
          if (!r.ok() || present > 1) return bad("malformed stream");
          if (!present) {
            if (st == &s.v) return bad("a segment without values");
            continue;
          }
          const uint32_t ci = r.get<uint32_t>();
          const std::string name = r.str(4096);
          if (!r.ok() || ci >= codecs.size() || codecs[ci]->name() != name)
            return bad("codec '" + name + "' is not the method's (" + method.spec() + ")");
          st->codec = codecs[ci];
          st->blocks_per_page = r.get<int32_t>();
          st->block_bytes = r.get<int32_t>();
          const int tpb = st->codec->tokens_per_block();
          if (!r.ok() || st->block_bytes != st->codec->block_bytes(g.head_dim) || s.n_tokens % tpb != 0)
            return bad("block layout of codec " + name + " differs from the method's");
          // Pages as this pool makes them (LayerEditor::add_segment): a file may not declare
          // bigger ones, which would take a page's bytes for each block the file holds.
          if (st->blocks_per_page != blocks_per_page(pool, st->block_bytes))
            return bad("pages of " + std::to_string(st->blocks_per_page) + " blocks of codec " + name + ", this cache's hold " +
                       std::to_string(blocks_per_page(pool, st->block_bytes)) + " (saved with another KV page size?)");
          const int64_t n_blocks = s.n_tokens / tpb;
          const uint64_t n_pages = r.count(uint64_t{1} << 31, 1);
          if (!r.ok() || static_cast<int64_t>(n_pages) != (n_blocks + st->blocks_per_page - 1) / st->blocks_per_page)
            return bad("page count of a stream differs from its tokens");
          StreamPlan plan;
          plan.data.resize(n_pages);
          plan.used.resize(n_pages);
          for (uint64_t p = 0; p < n_pages; ++p) {
            const uint8_t live = r.get<uint8_t>();
            if (!r.ok() || live > 1) return bad("malformed page");
            if (!live) {
              ++st->n_freed_pages;
              continue;
            }
            const int64_t first = static_cast<int64_t>(p) * st->blocks_per_page;
            plan.used[p] = static_cast<size_t>(std::min<int64_t>(st->blocks_per_page, n_blocks - first)) *
                           static_cast<size_t>(st->block_bytes);
            plan.data[p] = r.take(plan.used[p]);
            if (!plan.data[p]) return bad("truncated page data");
            need += st->page_bytes();
          }
          plans.push_back(std::move(plan));
          streams.push_back(st);
        }
      }
      if (head_tokens != lc.n_tokens)
        return bad("the segments of layer " + std::to_string(l) + " hold " + std::to_string(head_tokens) +
                   " tokens, not " + std::to_string(lc.n_tokens));
    }
    if (!load_state(method.new_layer_state(l), &lc, &lc.state))
      return bad("the state of layer " + std::to_string(l) + " of " + method.spec() + " is malformed");
  }
  const SequencePolicy* policy = method.sequence_policy();
  if (!load_state(policy ? policy->new_sequence_state() : nullptr, nullptr, &seq.state))
    return bad("the per-sequence state of " + method.spec() + " is malformed");
  if (!keys_have_sources(seq, method))
    return bad("a segment without keys has no matching segment in the layer that " + method.spec() +
               " shares keys from (saved under another grouping?)");
  if (!r.at_end()) return bad(std::to_string(r.left()) + " bytes after the last layer");
  const uint64_t free_bytes = pool.budget_bytes() - std::min(pool.budget_bytes(), pool.bytes_in_use());
  if (need > free_bytes)
    return out_of_memory("the file's KV cache takes " + format_bytes(need) + ", more than the " +
                         format_bytes(free_bytes) + " free of the KV budget of " + format_bytes(pool.budget_bytes()) +
                         " (raise --kv-budget)");
  // Everything checked: take the pages and copy the blocks (unused page tails zeroed).
  std::vector<PageId> taken;
  for (size_t i = 0; i < plans.size(); ++i) {
    Stream& st = *streams[i];
    for (size_t p = 0; p < plans[i].data.size(); ++p) {
      if (!plans[i].data[p]) {
        st.pages.push_back(kNoPage);
        st.page_data.push_back(nullptr);
        continue;
      }
      Result<PageId> id = pool.allocate(st.page_bytes());
      if (!id.is_ok()) {
        for (PageId t : taken) pool.free(t);
        return id.status();
      }
      taken.push_back(*id);
      uint8_t* dst = pool.data(*id);
      std::memcpy(dst, plans[i].data[p], plans[i].used[p]);
      std::memset(dst + plans[i].used[p], 0, st.page_bytes() - plans[i].used[p]);
      st.pages.push_back(*id);
      st.page_data.push_back(dst);
    }
  }
  *out = std::move(seq);
  return Status::ok();
}

}  // namespace vlkv
