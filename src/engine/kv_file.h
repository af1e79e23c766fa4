// The container of a KV file (docs/kv_file.md): a fixed header, a section table and
// sections, each with its own CRC32 (zlib), versioned. Knows nothing of what sections hold;
// kv_save.cpp fills and reads them. Parsing never reads past the bytes it is given.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/safe_file.h"
#include "kv/kv_bytes.h"

#include "vlkv/status.h"

namespace vlkv {

inline constexpr char kKvFileMagic[8] = {'V', 'L', 'K', 'V', '-', 'K', 'V', '\n'};
// 2: identities are 128 bits of a SHA-256 (gguf_identity), media hashes from media_content_digest.
inline constexpr uint32_t kKvFileVersion = 2;
inline constexpr size_t kKvFileHeaderBytes = 32;   // magic, version, n_sections, file_size, header crc
inline constexpr size_t kKvFileEntryBytes = 24;    // id, crc, offset, size
inline constexpr uint32_t kKvFileMaxSections = 16;

// Section ids (each at most once).
enum KvFileSectionId : uint32_t {
  kSectionIdentity = 1,      // model (and mmproj) identity, geometry
  kSectionMethod = 2,        // KV method spec, page bytes the cache takes
  kSectionTokens = 3,        // token ids, kinds, positions, next position
  kSectionMedia = 4,         // media items: content hash and rows
  kSectionKv = 5,            // the sequence's cache (kv_sequence_io.h)
  kSectionConversation = 6,  // vlkv chat's turns (optional)
  kSectionPrefixRows = 7,    // a prefix-cache entry's pass size and row keys (instead of tokens)
  kSectionCheckpoint = 8,    // an ingest checkpoint: where a streamed prompt's prefill stood (ingest_checkpoint.h)
};

struct KvFileSection {
  uint32_t id = 0;
  std::string bytes;
};

// The whole file image of these sections.
std::string build_kv_file(const std::vector<KvFileSection>& sections);

// A parsed file: section bytes point into the data given to parse_kv_file.
struct KvFileSectionView {
  uint32_t id = 0;
  const uint8_t* data = nullptr;
  size_t size = 0;
};
// Checks magic, version, the size the header claims, the header's and every section's CRC,
// and that sections lie within the data without overlapping; InvalidFile naming the first
// problem ("truncated: ...", "bad checksum of section tokens", ...).
Result<std::vector<KvFileSectionView>> parse_kv_file(const uint8_t* data, size_t size);

// A KV file written section by section as its bytes are produced (an AtomicFile: the target is
// replaced only by commit()), so a large section (a long video's cache) goes to disk without a
// copy in memory: the same bytes as build_kv_file of the same sections. The section table is
// written last, over the space left for it; sections come in the order they are to be read.
class KvFileWriter final : public ByteSink {
 public:
  static Result<KvFileWriter> create(const std::string& path, uint32_t n_sections);
  KvFileWriter(KvFileWriter&&) noexcept = default;
  ~KvFileWriter();

  Status add(uint32_t id, std::string_view bytes);
  // A section whose bytes fill() appends to this writer (ByteWriter(this), or append).
  template <class Fill>
  Status add_streamed(uint32_t id, Fill&& fill) {
    VLKV_RETURN_IF_ERROR(begin_section(id));
    VLKV_RETURN_IF_ERROR(fill());
    return end_section();
  }
  Status commit();  // every announced section added
  uint64_t bytes() const { return end_; }  // the file's size so far (all of it after commit)
  void append(const char* p, size_t n) override;

 private:
  struct Entry {
    uint32_t id = 0, crc = 0;
    uint64_t offset = 0, size = 0;
  };
  explicit KvFileWriter(AtomicFile f, uint32_t n) : file_(std::move(f)), n_sections_(n) {}
  Status begin_section(uint32_t id);
  Status end_section();
  Status flush();
  AtomicFile file_;
  uint32_t n_sections_;
  std::vector<Entry> entries_;
  bool open_ = false;     // a section is being written
  uint64_t end_ = 0;      // bytes written so far, buffered ones included
  uint32_t crc_ = 0;      // of the open section so far
  std::string buffer_;    // not yet written (up to kBufferBytes)
  Status error_;          // the first write error of append (which returns nothing)
};
// Reads a regular file (a FIFO or device is refused, never waited on) whose header claims at
// most max_bytes: the header and section table are read and checked (their checksum, the
// claimed size against fstat's) before the rest is read (and allocated).
Result<std::vector<uint8_t>> read_kv_file(const std::string& path, uint64_t max_bytes);

const char* kv_file_section_name(uint32_t id);

}  // namespace vlkv
