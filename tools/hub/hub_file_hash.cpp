#include "hub/hub_file_hash.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <vector>

#include "hub/hub_cache.h"

namespace vlkv::hub {

Status check_file_oid(const std::filesystem::path& file, const std::string& oid) {
  if (oid.empty()) return Status::ok();
  const bool lfs = is_hex(oid, 64);
  if (!lfs && !is_hex(oid, 40)) return invalid_argument("unexpected object id '" + oid + "'");
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec) return io_error(file.string() + ": " + ec.message());
  std::unique_ptr<FILE, int (*)(FILE*)> in(std::fopen(file.c_str(), "rb"), &std::fclose);
  if (!in) return io_error(file.string() + ": cannot open");
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), lfs ? EVP_sha256() : EVP_sha1(), nullptr) != 1)
    return io_error("cannot start a digest");
  if (!lfs) {
    const std::string header = "blob " + std::to_string(size);
    EVP_DigestUpdate(ctx.get(), header.data(), header.size() + 1);  // with its '\0'
  }
  std::vector<unsigned char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), in.get())) > 0) EVP_DigestUpdate(ctx.get(), buf.data(), n);
  if (std::ferror(in.get())) return io_error(file.string() + ": read error");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &md_len);
  std::string hex;
  static const char* kDigits = "0123456789abcdef";
  for (unsigned int i = 0; i < md_len; ++i) {
    hex += kDigits[md[i] >> 4];
    hex += kDigits[md[i] & 15];
  }
  std::string want = oid;
  std::transform(want.begin(), want.end(), want.begin(), [](unsigned char c) { return std::tolower(c); });
  if (hex != want)
    return invalid_file(file.string() + ": content does not match the hub's " + (lfs ? "sha256 " : "git oid ") + oid +
                        " (got " + hex + ")");
  return Status::ok();
}

}  // namespace vlkv::hub
