#include "engine/gguf_identity.h"

#include <algorithm>

namespace vlkv {

Digest128 gguf_identity(const GgufFile& g) {
  constexpr uint64_t kTensorSampleBytes = 4096;
  Sha256 h;
  h.update_string("vlkv gguf identity v2");
  h.update_value(static_cast<uint64_t>(g.file_size()));
  h.update_value(static_cast<uint64_t>(g.header_size()));
  if (g.header_data()) h.update(g.header_data(), g.header_size());
  for (const GgufTensorInfo& t : g.tensors())
    if (t.data) h.update(t.data, static_cast<size_t>(std::min<uint64_t>(t.n_bytes, kTensorSampleBytes)));
  return h.finish128();
}

}  // namespace vlkv
