// Content digests for the prefix cache and the encoder cache: SHA-256 (OpenSSL's libcrypto) of
// media pixels and preprocessing parameters, so two different images never share a
// cache entry even when a client crafts them to (a 64-bit FNV could be made to collide).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX, kept out of this header

namespace vlkv {

// 128 bits of a SHA-256: what cache keys compare (collision-resistant for any input).
struct Digest128 {
  uint64_t hi = 0, lo = 0;
  bool operator==(const Digest128&) const = default;
  bool is_zero() const { return hi == 0 && lo == 0; }
  std::string hex() const;  // 32 lowercase hex digits
};

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  template <typename T>
  void update_value(const T& v) { update(&v, sizeof v); }
  void update_string(const std::string& s) {
    update_value(static_cast<uint64_t>(s.size()));  // length first: "ab"+"c" differs from "a"+"bc"
    update(s.data(), s.size());
  }
  std::array<uint8_t, 32> finish();  // once
  Digest128 finish128();            // the first 16 bytes of finish()

 private:
  std::unique_ptr<evp_md_ctx_st, void (*)(evp_md_ctx_st*)> ctx_;
};

}  // namespace vlkv
