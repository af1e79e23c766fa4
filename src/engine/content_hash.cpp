// SHA-256 through OpenSSL's libcrypto (Debian's libssl-dev): a well-kept implementation that
// uses the CPU's SHA extensions or SIMD where present, so hashing a frame's pixels costs far
// less than the vision encoder.
#include "engine/content_hash.h"

#include <openssl/evp.h>

#include <cstdio>

#include "base/check.h"

namespace vlkv {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
  VLKV_CHECK(ctx_ && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1);
}

void Sha256::update(const void* data, size_t n) {
  VLKV_CHECK(EVP_DigestUpdate(ctx_.get(), data, n) == 1);
}

std::array<uint8_t, 32> Sha256::finish() {
  std::array<uint8_t, 32> out{};
  unsigned int n = 0;
  VLKV_CHECK(EVP_DigestFinal_ex(ctx_.get(), out.data(), &n) == 1 && n == out.size());
  return out;
}

Digest128 Sha256::finish128() {
  const std::array<uint8_t, 32> d = finish();
  Digest128 r;
  for (int i = 0; i < 8; ++i) {
    r.hi = r.hi << 8 | d[i];
    r.lo = r.lo << 8 | d[8 + i];
  }
  return r;
}

std::string Digest128::hex() const {
  char b[33];
  std::snprintf(b, sizeof b, "%016llx%016llx", static_cast<unsigned long long>(hi), static_cast<unsigned long long>(lo));
  return b;
}

}  // namespace vlkv
