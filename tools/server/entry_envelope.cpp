#include "server/entry_envelope.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>

#include <cstdint>
#include <cstring>
#include <optional>

namespace vlkv::server {
namespace {

constexpr char kMagic[8] = {'V', 'L', 'K', 'V', 'M', 'A', 'C', '1'};

// libcrypto failing (out of memory) gives no MAC: sealed entries then never verify and
// opened ones are refused, a miss either way.
std::array<unsigned char, 32> hmac_sha256(const unsigned char* key, size_t key_len, std::string_view data) {
  std::array<unsigned char, 32> out{};
  unsigned int n = 0;
  HMAC(EVP_sha256(), key, static_cast<int>(key_len), reinterpret_cast<const unsigned char*>(data.data()), data.size(),
       out.data(), &n);
  return out;
}

// One HMAC-SHA256 over several pieces (the image is not copied to be signed).
class Hmac {
 public:
  explicit Hmac(const std::array<unsigned char, 32>& key) {
    mac_ = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    ctx_ = mac_ ? EVP_MAC_CTX_new(mac_) : nullptr;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0), OSSL_PARAM_construct_end()};
    ok_ = ctx_ && EVP_MAC_init(ctx_, key.data(), key.size(), params);
  }
  ~Hmac() {
    EVP_MAC_CTX_free(ctx_);
    EVP_MAC_free(mac_);
  }
  Hmac(const Hmac&) = delete;
  Hmac& operator=(const Hmac&) = delete;
  void update(const void* p, size_t n) { ok_ = ok_ && EVP_MAC_update(ctx_, static_cast<const unsigned char*>(p), n); }
  // The MAC, or nothing when libcrypto failed.
  std::optional<std::array<unsigned char, 32>> finish() {
    std::array<unsigned char, 32> out{};
    size_t n = 0;
    ok_ = ok_ && EVP_MAC_final(ctx_, out.data(), &n, out.size()) && n == out.size();
    if (!ok_) return std::nullopt;
    return out;
  }

 private:
  EVP_MAC* mac_ = nullptr;
  EVP_MAC_CTX* ctx_ = nullptr;
  bool ok_ = false;
};

void put_u64(Hmac& h, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  h.update(b, sizeof b);
}

}  // namespace

EntrySigner::EntrySigner(std::string_view secret) {
  const auto* s = reinterpret_cast<const unsigned char*>(secret.data());
  mac_key_ = hmac_sha256(s, secret.size(), "vlkv prefix-store entry mac v1");
  const std::array<unsigned char, 32> id = hmac_sha256(s, secret.size(), "vlkv prefix-store secret id v1");
  static const char* kHex = "0123456789abcdef";
  for (size_t i = 0; i < 8; ++i) {
    id_ += kHex[id[i] >> 4];
    id_ += kHex[id[i] & 15];
  }
}

std::optional<std::array<unsigned char, 32>> EntrySigner::mac(std::string_view key, std::string_view payload) const {
  Hmac h(mac_key_);
  h.update(kMagic, sizeof kMagic);
  put_u64(h, key.size());
  h.update(key.data(), key.size());
  put_u64(h, payload.size());
  h.update(payload.data(), payload.size());
  return h.finish();
}

void EntrySigner::seal(std::string_view key, std::string& value) const {
  const std::array<unsigned char, 32> m = mac(key, value).value_or(std::array<unsigned char, 32>{});
  value.append(kMagic, sizeof kMagic);
  value.append(reinterpret_cast<const char*>(m.data()), m.size());
}

bool EntrySigner::open(std::string_view key, std::string& value) const {
  if (value.size() < kEnvelopeTrailerBytes) return false;
  const size_t n = value.size() - kEnvelopeTrailerBytes;
  if (std::memcmp(value.data() + n, kMagic, sizeof kMagic) != 0) return false;
  const std::optional<std::array<unsigned char, 32>> m = mac(key, std::string_view(value).substr(0, n));
  if (!m || CRYPTO_memcmp(m->data(), value.data() + n + sizeof kMagic, m->size()) != 0) return false;
  value.resize(n);
  return true;
}

}  // namespace vlkv::server
