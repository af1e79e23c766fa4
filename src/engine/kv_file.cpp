#include "engine/kv_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/safe_file.h"
#include "kv/kv_bytes.h"

namespace vlkv {
namespace {

// c continued over n more bytes.
uint32_t crc_more(uint32_t c, const void* p, size_t n) {
  const auto* b = static_cast<const Bytef*>(p);
  while (n > 0) {  // zlib takes uInt lengths
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    c = static_cast<uint32_t>(crc32(c, b, chunk));
    b += chunk;
    n -= chunk;
  }
  return c;
}
uint32_t crc_of(const void* p, size_t n) { return crc_more(static_cast<uint32_t>(crc32(0L, Z_NULL, 0)), p, n); }

// The header's CRC covers its first 24 bytes and the section table.
uint32_t header_crc(const uint8_t* file, size_t table_bytes) {
  uLong c = crc_of(file, 24);
  c = crc32(c, file + kKvFileHeaderBytes, static_cast<uInt>(table_bytes));
  return static_cast<uint32_t>(c);
}

// The header's fields, its CRC left 0 for seal_header.
void write_header(ByteWriter& w, size_t n_sections, uint64_t total) {
  w.bytes(kKvFileMagic, sizeof kKvFileMagic);
  w.put<uint32_t>(kKvFileVersion);
  w.put<uint32_t>(static_cast<uint32_t>(n_sections));
  w.put<uint64_t>(total);
  w.put<uint32_t>(0);  // header crc: seal_header
  w.put<uint32_t>(0);  // reserved
}
// head: the header and the section table; sets the header's CRC.
void seal_header(std::string& head) {
  const uint32_t hc = header_crc(reinterpret_cast<const uint8_t*>(head.data()), head.size() - kKvFileHeaderBytes);
  std::memcpy(head.data() + 24, &hc, sizeof hc);
}

}  // namespace

const char* kv_file_section_name(uint32_t id) {
  switch (id) {
    case kSectionIdentity: return "identity";
    case kSectionMethod: return "method";
    case kSectionTokens: return "tokens";
    case kSectionMedia: return "media";
    case kSectionKv: return "kv";
    case kSectionConversation: return "conversation";
    case kSectionPrefixRows: return "prefix rows";
    case kSectionCheckpoint: return "checkpoint";
    default: return "unknown";
  }
}

std::string build_kv_file(const std::vector<KvFileSection>& sections) {
  const size_t table = sections.size() * kKvFileEntryBytes;
  uint64_t total = kKvFileHeaderBytes + table;
  for (const KvFileSection& s : sections) total += s.bytes.size();
  std::string out;
  ByteWriter w(&out);
  write_header(w, sections.size(), total);
  uint64_t offset = kKvFileHeaderBytes + table;
  for (const KvFileSection& s : sections) {
    w.put<uint32_t>(s.id);
    w.put<uint32_t>(crc_of(s.bytes.data(), s.bytes.size()));
    w.put<uint64_t>(offset);
    w.put<uint64_t>(s.bytes.size());
    offset += s.bytes.size();
  }
  seal_header(out);
  out.reserve(total);
  for (const KvFileSection& s : sections) out += s.bytes;
  return out;
}

namespace {

// The header and section table: magic, version, section count, the size the header claims
// against the file's, and the header's CRC. data holds the file's first `avail` bytes (at
// least the header and table when the file has them); *table_bytes receives the table's size.
Status check_kv_file_header(const uint8_t* data, size_t avail, uint64_t size, size_t* table_bytes) {
  if (size < kKvFileHeaderBytes || avail < kKvFileHeaderBytes)
    return invalid_file("truncated: " + std::to_string(size) + " bytes, shorter than the " +
                        std::to_string(kKvFileHeaderBytes) + "-byte header");
  if (std::memcmp(data, kKvFileMagic, sizeof kKvFileMagic) != 0) return invalid_file("not a vlkv KV file (bad magic)");
  ByteReader r(data + 8, kKvFileHeaderBytes - 8);
  const uint32_t version = r.get<uint32_t>(), n = r.get<uint32_t>();
  const uint64_t claimed = r.get<uint64_t>();
  const uint32_t hc = r.get<uint32_t>(), reserved = r.get<uint32_t>();
  if (version < kKvFileVersion)
    return invalid_file("KV file version " + std::to_string(version) + ", written by an older vlkv; this vlkv reads version " +
                        std::to_string(kKvFileVersion) + " (its model identities differ): save it again");
  if (version != kKvFileVersion)
    return invalid_file("KV file version " + std::to_string(version) + ", this vlkv reads version " +
                        std::to_string(kKvFileVersion));
  if (n == 0 || n > kKvFileMaxSections) return invalid_file("section count " + std::to_string(n) + " out of range");
  if (claimed != size)
    return invalid_file("truncated or extended: the header says " + std::to_string(claimed) + " bytes, the file has " +
                        std::to_string(size));
  const size_t table = static_cast<size_t>(n) * kKvFileEntryBytes;
  if (size < kKvFileHeaderBytes + table || avail < kKvFileHeaderBytes + table)
    return invalid_file("truncated: the section table ends past the file");
  if (reserved != 0 || header_crc(data, table) != hc) return invalid_file("bad checksum of the header");
  *table_bytes = table;
  return Status::ok();
}

}  // namespace

Result<std::vector<KvFileSectionView>> parse_kv_file(const uint8_t* data, size_t size) {
  size_t table = 0;
  VLKV_RETURN_IF_ERROR(check_kv_file_header(data, size, size, &table));
  std::vector<KvFileSectionView> out;
  ByteReader t(data + kKvFileHeaderBytes, table);
  uint64_t next = kKvFileHeaderBytes + table;  // sections follow the table in order, back to back
  for (uint32_t i = 0; i < table / kKvFileEntryBytes; ++i) {
    KvFileSectionView v;
    v.id = t.get<uint32_t>();
    const uint32_t crc = t.get<uint32_t>();
    const uint64_t offset = t.get<uint64_t>(), length = t.get<uint64_t>();
    const std::string name = kv_file_section_name(v.id);
    if (offset != next || length > size - offset)
      return invalid_file("section " + name + " at bytes " + std::to_string(offset) + "+" + std::to_string(length) +
                          " lies outside the file or out of order");
    for (const KvFileSectionView& o : out)
      if (o.id == v.id) return invalid_file("section " + name + " appears twice");
    v.data = data + offset;
    v.size = static_cast<size_t>(length);
    if (crc_of(v.data, v.size) != crc) return invalid_file("bad checksum of section " + name);
    next = offset + length;
    out.push_back(v);
  }
  if (next != size) return invalid_file(std::to_string(size - next) + " bytes after the last section");
  return out;
}

namespace {
constexpr size_t kBufferBytes = 1 << 20;  // few large writes, and little memory
}  // namespace

Result<KvFileWriter> KvFileWriter::create(const std::string& path, uint32_t n_sections) {
  if (n_sections == 0 || n_sections > kKvFileMaxSections)
    return Status(StatusCode::kInternal, "a KV file of " + std::to_string(n_sections) + " sections");
  VLKV_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::create(path));
  KvFileWriter w(std::move(f), n_sections);
  // The header and table are written last, over this space.
  w.end_ = kKvFileHeaderBytes + static_cast<uint64_t>(n_sections) * kKvFileEntryBytes;
  w.buffer_.assign(static_cast<size_t>(w.end_), '\0');
  return w;
}

KvFileWriter::~KvFileWriter() = default;

void KvFileWriter::append(const char* p, size_t n) {
  if (!error_.is_ok()) return;
  crc_ = crc_more(crc_, p, n);
  end_ += n;
  if (buffer_.size() + n > kBufferBytes) {
    if (Status st = flush(); !st.is_ok()) {
      error_ = st;
      return;
    }
    if (n >= kBufferBytes) {  // a large piece (a page run) goes straight out
      if (Status st = file_.write(p, n); !st.is_ok()) error_ = st;
      return;
    }
  }
  buffer_.append(p, n);
}

Status KvFileWriter::flush() {
  if (buffer_.empty()) return Status::ok();
  Status st = file_.write(buffer_.data(), buffer_.size());
  buffer_.clear();
  return st;
}

Status KvFileWriter::begin_section(uint32_t id) {
  if (open_ || entries_.size() >= n_sections_)
    return Status(StatusCode::kInternal, "KV file: more sections than announced, or one inside another");
  open_ = true;
  entries_.push_back(Entry{id, 0, end_, 0});
  crc_ = static_cast<uint32_t>(crc32(0L, Z_NULL, 0));
  return error_;
}

Status KvFileWriter::end_section() {
  VLKV_RETURN_IF_ERROR(error_);
  Entry& e = entries_.back();
  e.size = end_ - e.offset;
  e.crc = crc_;
  open_ = false;
  return Status::ok();
}

Status KvFileWriter::add(uint32_t id, std::string_view bytes) {
  VLKV_RETURN_IF_ERROR(begin_section(id));
  append(bytes.data(), bytes.size());
  return end_section();
}

Status KvFileWriter::commit() {
  if (open_ || entries_.size() != n_sections_)
    return Status(StatusCode::kInternal, "KV file: " + std::to_string(entries_.size()) + " of " +
                                             std::to_string(n_sections_) + " sections written");
  VLKV_RETURN_IF_ERROR(error_);
  VLKV_RETURN_IF_ERROR(flush());
  std::string head;
  ByteWriter w(&head);
  write_header(w, entries_.size(), end_);
  for (const Entry& e : entries_) {
    w.put<uint32_t>(e.id);
    w.put<uint32_t>(e.crc);
    w.put<uint64_t>(e.offset);
    w.put<uint64_t>(e.size);
  }
  seal_header(head);
  VLKV_RETURN_IF_ERROR(file_.write_at(0, head.data(), head.size()));
  return file_.commit();
}

Result<std::vector<uint8_t>> read_kv_file(const std::string& path, uint64_t max_bytes) {
  // Only a regular file: a FIFO or a device would block or never end.
  VLKV_ASSIGN_OR_RETURN(RegularFile f, open_regular_file(path));
  const uint64_t size = f.size;
  // The header and table first, checksum verified, before the body is read (or allocated).
  uint8_t head[kKvFileHeaderBytes + kKvFileMaxSections * kKvFileEntryBytes];
  const size_t head_bytes = static_cast<size_t>(std::min<uint64_t>(size, sizeof head));
  VLKV_RETURN_IF_ERROR(read_exactly(f, 0, head, head_bytes, path));
  size_t table = 0;
  if (Status st = check_kv_file_header(head, head_bytes, size, &table); !st.is_ok())
    return Status(st.code(), path + ": " + st.message());
  if (size > max_bytes)
    return out_of_memory(path + ": " + std::to_string(size) + " bytes, more than the KV budget allows (" +
                         std::to_string(max_bytes) + "; raise --kv-budget)");
  std::vector<uint8_t> data(static_cast<size_t>(size));
  std::memcpy(data.data(), head, head_bytes);
  VLKV_RETURN_IF_ERROR(read_exactly(f, head_bytes, data.data() + head_bytes, data.size() - head_bytes, path));
  return data;
}

}  // namespace vlkv
