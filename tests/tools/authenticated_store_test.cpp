// AuthenticatedStore and its envelope (vlkv serve --cache-secret-file): what it puts comes
// back whole; a value planted in the inner store without the secret's MAC (or with one byte
// changed, or moved under another key) is a miss, counted as forged, handed to the inner
// store's refused() and never returned; a store written under another secret is not even
// looked up (keys carry the secret's id).
#include "server/authenticated_store.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

namespace vlkv::server {
namespace {

// A PrefixStore in memory that counts like the real ones.
class MemoryStore : public PrefixStore {
 public:
  std::optional<std::string> get(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = values.find(key);
    if (it == values.end()) {
      ++stats_.misses;
      return std::nullopt;
    }
    ++stats_.hits;
    return it->second;
  }
  bool wants(const std::string& key, uint64_t) override { return !values.count(key); }
  void put(const std::string& key, std::string value) override { values[key] = std::move(value); }
  void refused(const std::string& key) override {
    ++stats_.refused;
    values.erase(key);
  }
  PrefixStoreStats stats() const override { return stats_; }
  std::map<std::string, std::string> values;

 private:
  std::mutex mutex_;
  PrefixStoreStats stats_;
};

const std::string kKey = "vlkv:prefix:" + std::string(32, 'c');
const std::string kSecret(32, 's');

TEST(EntryEnvelope, SealsAndOpensOnlyTheSameKeyAndBytes) {
  EntrySigner signer(kSecret);
  EXPECT_EQ(signer.id().size(), 16u);
  EXPECT_NE(signer.id(), EntrySigner(std::string(32, 't')).id());
  std::string v = "KV image";
  signer.seal("k", v);
  EXPECT_EQ(v.size(), 8 + kEnvelopeTrailerBytes);
  std::string other_key = v;
  EXPECT_FALSE(signer.open("k2", other_key));
  EXPECT_EQ(other_key, v);  // untouched when refused
  for (size_t i = 0; i < v.size(); ++i) {
    std::string flipped = v;
    flipped[i] ^= 1;
    EXPECT_FALSE(signer.open("k", flipped)) << "byte " << i;
  }
  std::string short_value = v.substr(0, kEnvelopeTrailerBytes - 1);
  EXPECT_FALSE(signer.open("k", short_value));
  EXPECT_FALSE(EntrySigner(std::string(32, 't')).open("k", v));
  ASSERT_TRUE(signer.open("k", v));
  EXPECT_EQ(v, "KV image");
}

TEST(AuthenticatedStore, ForgedValuesAreMissesNeverReturned) {
  auto inner = std::make_shared<MemoryStore>();
  AuthenticatedStore store(inner, kSecret);
  const std::string stored_under = store.store_key(kKey);
  EXPECT_NE(stored_under, kKey);
  EXPECT_EQ(stored_under.rfind("vlkv:prefix:", 0), 0u);

  ASSERT_TRUE(store.wants(kKey, 100));
  store.put(kKey, "a genuine KV image");
  EXPECT_EQ(store.get(kKey).value_or(""), "a genuine KV image");  // found while waiting to be signed
  store.flush();
  ASSERT_EQ(inner->values.count(stored_under), 1u);
  EXPECT_EQ(store.get(kKey).value_or(""), "a genuine KV image");

  // Someone with write access to the store replaces the value: unsigned (a valid KV file
  // with its CRCs, say), then the genuine one with its image changed, then a genuine value
  // of another key moved here.
  std::string changed = inner->values[stored_under];
  changed[3] ^= 0x20;
  AuthenticatedStore other_key_writer(std::make_shared<MemoryStore>(), kSecret);
  const std::string other_key = "vlkv:prefix:" + std::string(32, 'd');
  other_key_writer.put(other_key, "another prompt's image");
  other_key_writer.flush();
  const std::string moved = static_cast<MemoryStore&>(other_key_writer.inner()).values.begin()->second;
  int forged = 0;
  for (const std::string& planted : {std::string("a valid KV file, no MAC"), changed, moved}) {
    inner->values[stored_under] = planted;
    EXPECT_FALSE(store.get(kKey).has_value());
    ++forged;
    EXPECT_EQ(inner->values.count(stored_under), 0u) << "refused: the inner store may delete it";
  }
  const PrefixStoreStats st = store.stats();
  EXPECT_EQ(st.forged, forged);
  EXPECT_EQ(st.refused, forged);
  EXPECT_EQ(st.hits, 2);  // from the queue, then from the inner store
  EXPECT_EQ(st.misses, forged);
}

TEST(AuthenticatedStore, AnotherSecretsEntriesAreMisses) {
  auto inner = std::make_shared<MemoryStore>();
  AuthenticatedStore ours(inner, kSecret), theirs(inner, std::string(32, 'x'));
  theirs.put(kKey, "their image");
  theirs.flush();
  EXPECT_FALSE(ours.get(kKey).has_value());
  EXPECT_EQ(ours.stats().forged, 0);  // not forged: another deployment's key, never looked at
  EXPECT_TRUE(ours.wants(kKey, 10));
  ours.put(kKey, "our image");
  ours.flush();
  EXPECT_EQ(ours.get(kKey).value_or(""), "our image");
  EXPECT_EQ(theirs.get(kKey).value_or(""), "their image");
}

}  // namespace
}  // namespace vlkv::server
