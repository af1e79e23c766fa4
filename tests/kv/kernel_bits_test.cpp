// The KV kernels give the same bits on x86 and ARM64 where they claim to: the ARM64 kernels
// (*_arm.cpp, *_dotprod.cpp) take the x86 AVX2 tier's float operations in its order and the
// same exact integer sums (the integer tile kernels agree bit for bit across every x86 tier),
// so stored bytes, scores and outputs of these codecs at any ARM64 SIMD tier equal the x86
// AVX2 tier's. tests/data/kv_kernel_bits.txt holds FNV-1a hashes of those bits, written on x86
// at the AVX2 tier (VLKV_WRITE_KERNEL_BITS=1 rewrites it); checked here on x86 at the AVX2
// tier (a change of an x86 kernel's bits shows up as a failure: the ARM64 port must follow)
// and on ARM64 at every SIMD tier. Inputs come from a fixed integer generator (no <random>
// distribution: libstdc++'s goes through long double, 80-bit on x86, 128-bit on ARM64).
// The softmax helpers (softmax_kernels.h) are called through their x86 AVX2 / ARM64 NEON variants
// directly (their dispatch table is internal to attention.cpp).
// Left out: the FFT codecs (x86 transforms 8 vectors at once by a radix-2 FFT, ARM64 one at a
// time by the dense product: other float sums, within the codec tests' tolerances).
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "kv/codec_registry.h"
#include "kv/softmax_kernels.h"
#include "kv_test_util.h"
#include "../lcg_floats.h"

namespace vlkv {
namespace {

using testing_lcg::lcg_floats;

// A few outlier channels (x 8), as real keys have.
std::vector<float> lcg_outliers(int n, int d, uint32_t seed) {
  std::vector<float> x = lcg_floats(static_cast<size_t>(n) * d, seed, -1.0f, 1.0f);
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < d; c += 13) x[static_cast<size_t>(t) * d + c] *= 8.0f;
  return x;
}

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

struct Case {
  const char* spec;
  int d, n_q;
};
// Integer tiles (keys and values, every bit width and dot), the f16 / f32 rows, the ternary
// tiles and rows, sign1c's bit planes, a rotated (WHT) codec, and mixk without its FFT at
// channel counts that are multiples of 8 (row weights' 8-lane loops without tails: the AVX2
// kernel's scalar tails are compiled by GCC with fused and unfused steps of its own choice,
// which the NEON kernel does not copy; with tails the two agree within the codec tests' bounds).
constexpr Case kCases[] = {
    {"int2:layout=k", 128, 4},        {"int4:g=64,layout=k", 64, 3},  {"int2c:G=64", 128, 6},
    {"int4c:G=32", 64, 1},            {"int2c:G=32,dot=8", 128, 4},   {"int8:layout=k", 64, 4},
    {"int8c:G=32,dot=8", 64, 5},      {"int2:layout=v", 128, 4},      {"int4:layout=v,dot=8", 64, 6},
    {"int8:layout=v", 128, 3},        {"wht_int2:g=128,layout=v", 128, 4}, {"f16", 128, 4},
    {"f16", 72, 3},                   {"f32", 64, 2},                 {"ternary:G=32", 128, 4},
    {"ternary:G=7,thr=0.7", 40, 3},   {"sign1c:G=32", 64, 4},
    {"mixk:G=32,frac=0.5,fft=none", 64, 3},
};

// "<spec> d=<d> n_q=<n_q>" -> "bytes=<hex> scores=<hex> out=<hex>" of the current tier.
std::string case_key(const Case& k) { return std::string(k.spec) + " d=" + std::to_string(k.d) + " n_q=" + std::to_string(k.n_q); }
std::string case_bits(const Case& k) {
  auto made = make_codec(k.spec);
  if (!made.is_ok()) return "error: " + made.status().message();
  const Codec& c = **made;
  const int d = k.d, n_q = k.n_q, tpb = c.tokens_per_block(), n = tpb * (100 / tpb + 1);
  const std::vector<float> x = lcg_outliers(n, d, 7 + d);
  kvtest::PagedCodes paged = kvtest::encode_paged(c, x, n, d, /*blocks_per_page=*/3, /*skip_blocks=*/1, 0);
  uint64_t hb = fnv1a(nullptr, 0);
  for (int64_t b = 0; b < paged.view.n_blocks(); ++b) hb = fnv1a(paged.view.block(b), paged.view.block_bytes, hb);
  std::vector<float> q = lcg_floats(static_cast<size_t>(n_q) * d, 11 + n_q, -2.0f, 2.0f);
  if (c.query_transform()) c.transform_query(q.data(), n_q, d);
  const std::vector<float> p = lcg_floats(static_cast<size_t>(n_q) * n, 13 + n_q, 0.0f, 1.0f);
  std::vector<float> logits(static_cast<size_t>(n_q) * n), out(static_cast<size_t>(n_q) * d, 0.25f);
  c.scores(q.data(), n_q, paged.view, 0.125f, logits.data(), n);
  c.accumulate(p.data(), n, n_q, paged.view, out.data());
  if (c.output_transform()) c.untransform_output(out.data(), n_q, d);
  char buf[96];
  std::snprintf(buf, sizeof buf, "bytes=%016llx scores=%016llx out=%016llx", static_cast<unsigned long long>(hb),
                static_cast<unsigned long long>(fnv1a(logits.data(), logits.size() * 4)),
                static_cast<unsigned long long>(fnv1a(out.data(), out.size() * 4)));
  return buf;
}

// exp_sub_sum and max over logits spanning ~60 nats (the exp's polynomial, its clamp at -87,
// the padded tail: n = 1003) with the variant of this architecture; "" where there is none.
std::string softmax_bits() {
  const attn::SoftmaxKernels* k = nullptr;
#if defined(__x86_64__) || defined(__i386__)
  if (cpu_features().avx2) k = &attn::kSoftmaxKernelsAvx2;
#elif defined(__aarch64__)
  k = &attn::kSoftmaxKernelsNeon;
#endif
  if (!k) return "";
  std::vector<float> x = lcg_floats(1003, 3, -60.0f, 4.0f);
  x[17] = -200.0f;  // below the clamp
  const float m = k->max(x.data(), static_cast<int64_t>(x.size()));
  const float sum = k->exp_sub_sum(x.data(), static_cast<int64_t>(x.size()), m);
  char buf[96];
  std::snprintf(buf, sizeof buf, "bytes=%08x scores=%08x out=%016llx", std::bit_cast<uint32_t>(m),
                std::bit_cast<uint32_t>(sum), static_cast<unsigned long long>(fnv1a(x.data(), x.size() * 4)));
  return buf;
}
constexpr const char* kSoftmaxKey = "softmax n=1003";

const std::string kBitsFile = std::string(VLKV_SOURCE_DIR) + "/tests/data/kv_kernel_bits.txt";

std::map<std::string, std::string> read_bits() {
  std::map<std::string, std::string> m;
  std::ifstream f(kBitsFile);
  std::string line;
  while (std::getline(f, line)) {
    const size_t at = line.find(" bytes=");
    if (line.empty() || line[0] == '#' || at == std::string::npos) continue;
    m[line.substr(0, at)] = line.substr(at + 1);
  }
  return m;
}

// The tiers whose bits the file states: x86 AVX2 (the reference) and every ARM64 SIMD tier.
std::vector<SimdTier> tiers_to_check() {
  std::vector<SimdTier> tiers;
  for (SimdTier t : kvtest::simd_tiers())
    if (t == SimdTier::kAvx2 || t == SimdTier::kNeon || t == SimdTier::kDotprod || t == SimdTier::kI8mm) tiers.push_back(t);
  return tiers;
}

TEST(KvKernelBits, MatchTheX86Avx2TierOnEveryArchitecture) {
  kvtest::SimdLevelGuard guard;
  if (const char* w = std::getenv("VLKV_WRITE_KERNEL_BITS"); w && std::string(w) == "1") {
    ASSERT_TRUE(cpu_features().avx2) << "the reference bits are the x86 AVX2 tier's";
    set_simd_tier_for_testing(SimdTier::kAvx2);
    std::ofstream f(kBitsFile);
    f << "# FNV-1a hashes of stored bytes, scores and outputs at the x86 AVX2 tier (tests/kv/kernel_bits_test.cpp)\n";
    for (const Case& k : kCases) f << case_key(k) << " " << case_bits(k) << "\n";
    f << kSoftmaxKey << " " << softmax_bits() << "\n";
    GTEST_SKIP() << "wrote " << kBitsFile;
  }
  const std::map<std::string, std::string> want = read_bits();
  ASSERT_FALSE(want.empty()) << kBitsFile << " is missing or empty";
  const std::vector<SimdTier> tiers = tiers_to_check();
  if (tiers.empty()) GTEST_SKIP() << "no tier here states the reference bits (x86 without AVX2)";
  for (SimdTier tier : tiers) {
    set_simd_tier_for_testing(tier);
    for (const Case& k : kCases) {
      const auto it = want.find(case_key(k));
      ASSERT_NE(it, want.end()) << case_key(k) << " is not in " << kBitsFile;
      EXPECT_EQ(case_bits(k), it->second) << case_key(k) << " at " << simd_tier_name(tier);
    }
  }
  const auto it = want.find(kSoftmaxKey);
  ASSERT_NE(it, want.end()) << kSoftmaxKey << " is not in " << kBitsFile;
  EXPECT_EQ(softmax_bits(), it->second) << "softmax helpers";
}

}  // namespace
}  // namespace vlkv
