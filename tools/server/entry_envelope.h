// The envelope of a prefix-store value (docs/prefix_cache.md, "Authenticated entries"): the
// KV file image followed by a 40-byte trailer, "VLKVMAC1" and an HMAC-SHA256 of the store key
// and the image under a key derived from the deployment's secret. The MAC binds the value to
// its key, so a valid entry cannot be replayed under another prompt's key either. A trailer
// (not a header) lets sealing append and opening truncate, without copying the image.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace vlkv::server {

constexpr size_t kEnvelopeTrailerBytes = 40;

class EntrySigner {
 public:
  // secret: the --cache-secret-file's bytes. Derives the MAC key and the secret's id.
  explicit EntrySigner(std::string_view secret);
  // 16 hex digits naming the secret (a derived value, not the secret): store keys carry it, so
  // deployments with different secrets never look up each other's entries.
  const std::string& id() const { return id_; }
  // Appends the trailer for value stored under key.
  void seal(std::string_view key, std::string& value) const;
  // Whether value ends with a trailer whose MAC (compared in constant time) holds for key;
  // if so the trailer is removed. Anything else (short, no magic, wrong MAC) leaves value as it is.
  bool open(std::string_view key, std::string& value) const;

 private:
  std::optional<std::array<unsigned char, 32>> mac(std::string_view key, std::string_view payload) const;
  std::array<unsigned char, 32> mac_key_{};
  std::string id_;
};

}  // namespace vlkv::server
