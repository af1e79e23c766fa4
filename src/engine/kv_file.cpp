#include "engine/kv_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "kv/kv_bytes.h"

namespace vlkv {
namespace {

uint32_t crc_of(const void* p, size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  const auto* b = static_cast<const Bytef*>(p);
  while (n > 0) {  // zlib takes uInt lengths
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    c = crc32(c, b, chunk);
    b += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(c);
}

// The header's CRC covers its first 24 bytes and the section table.
uint32_t header_crc(const uint8_t* file, size_t table_bytes) {
  uLong c = crc_of(file, 24);
  c = crc32(c, file + kKvFileHeaderBytes, static_cast<uInt>(table_bytes));
  return static_cast<uint32_t>(c);
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
    default: return "unknown";
  }
}

std::string build_kv_file(const std::vector<KvFileSection>& sections) {
  const size_t table = sections.size() * kKvFileEntryBytes;
  uint64_t total = kKvFileHeaderBytes + table;
  for (const KvFileSection& s : sections) total += s.bytes.size();
  std::string out;
  ByteWriter w(&out);
  w.bytes(kKvFileMagic, sizeof kKvFileMagic);
  w.put<uint32_t>(kKvFileVersion);
  w.put<uint32_t>(static_cast<uint32_t>(sections.size()));
  w.put<uint64_t>(total);
  w.put<uint32_t>(0);  // header crc, below
  w.put<uint32_t>(0);  // reserved
  uint64_t offset = kKvFileHeaderBytes + table;
  for (const KvFileSection& s : sections) {
    w.put<uint32_t>(s.id);
    w.put<uint32_t>(crc_of(s.bytes.data(), s.bytes.size()));
    w.put<uint64_t>(offset);
    w.put<uint64_t>(s.bytes.size());
    offset += s.bytes.size();
  }
  const uint32_t hc = header_crc(reinterpret_cast<const uint8_t*>(out.data()), table);
  std::memcpy(out.data() + 24, &hc, sizeof hc);
  for (const KvFileSection& s : sections) out += s.bytes;
  return out;
}

Result<std::vector<KvFileSectionView>> parse_kv_file(const uint8_t* data, size_t size) {
  if (size < kKvFileHeaderBytes)
    return invalid_file("truncated: " + std::to_string(size) + " bytes, shorter than the " +
                        std::to_string(kKvFileHeaderBytes) + "-byte header");
  if (std::memcmp(data, kKvFileMagic, sizeof kKvFileMagic) != 0) return invalid_file("not a vlkv KV file (bad magic)");
  ByteReader r(data + 8, size - 8);
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
  if (size < kKvFileHeaderBytes + table) return invalid_file("truncated: the section table ends past the file");
  if (reserved != 0 || header_crc(data, table) != hc) return invalid_file("bad checksum of the header");
  std::vector<KvFileSectionView> out;
  ByteReader t(data + kKvFileHeaderBytes, table);
  uint64_t next = kKvFileHeaderBytes + table;  // sections follow the table in order, back to back
  for (uint32_t i = 0; i < n; ++i) {
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

Status write_kv_file(const std::string& path, const std::string& image) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return io_error(path + ": cannot write (" + std::strerror(errno) + ")");
  const bool ok = std::fwrite(image.data(), 1, image.size(), f) == image.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) {
    std::remove(tmp.c_str());
    return io_error(path + ": write failed (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return io_error(path + ": cannot rename the written file into place (" + std::strerror(errno) + ")");
  }
  return Status::ok();
}

Result<std::vector<uint8_t>> read_kv_file(const std::string& path, uint64_t max_bytes) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return not_found(path + ": cannot open (" + std::strerror(errno) + ")");
  if (std::fseek(f.get(), 0, SEEK_END) != 0) return io_error(path + ": cannot seek");
  const long end = std::ftell(f.get());
  if (end < 0) return io_error(path + ": cannot tell its size");
  const uint64_t size = static_cast<uint64_t>(end);
  std::rewind(f.get());
  uint8_t head[kKvFileHeaderBytes];
  const size_t got = std::fread(head, 1, sizeof head, f.get());
  if (got < sizeof head)
    return invalid_file(path + ": truncated: " + std::to_string(got) + " bytes, shorter than the header");
  if (std::memcmp(head, kKvFileMagic, sizeof kKvFileMagic) != 0)
    return invalid_file(path + ": not a vlkv KV file (bad magic)");
  uint64_t claimed = 0;
  std::memcpy(&claimed, head + 16, sizeof claimed);
  if (claimed != size)
    return invalid_file(path + ": truncated or extended: the header says " + std::to_string(claimed) +
                        " bytes, the file has " + std::to_string(size));
  if (size > max_bytes)
    return out_of_memory(path + ": " + std::to_string(size) + " bytes, more than the KV budget allows (" +
                         std::to_string(max_bytes) + "; raise --kv-budget)");
  std::vector<uint8_t> data(static_cast<size_t>(size));
  std::memcpy(data.data(), head, sizeof head);
  if (std::fread(data.data() + sizeof head, 1, data.size() - sizeof head, f.get()) != data.size() - sizeof head)
    return io_error(path + ": read failed");
  return data;
}

}  // namespace vlkv
