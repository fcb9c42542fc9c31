// The server's result cache: LRU order, the byte bound, statistics.
#include "server/cache/result_cache.h"

#include "gtest/gtest.h"

namespace glossa::server {
namespace {

Translation Text(const std::string& text) {
  Translation t;
  t.hypotheses.push_back({text, -1.5f, {4, 5, 0}, {}, {}, {}});
  return t;
}

TEST(ResultCacheTest, AHitReturnsWhatWasStored) {
  ResultCache cache(1 << 20);
  EXPECT_FALSE(cache.Lookup("a"));
  cache.Insert("a", Text("alpha"));
  const auto hit = cache.Lookup("a");
  ASSERT_TRUE(hit);
  ASSERT_EQ(hit->hypotheses.size(), 1u);
  EXPECT_EQ(hit->hypotheses[0].text, "alpha");
  EXPECT_EQ(hit->hypotheses[0].token_ids, (std::vector<int>{4, 5, 0}));
  EXPECT_EQ(hit->hypotheses[0].score, -1.5f);
  const ResultCache::Stats s = cache.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.entries, 1);
  EXPECT_EQ(s.bytes, ResultCache::EntryBytes("a", Text("alpha")));
}

TEST(ResultCacheTest, TheLeastRecentlyUsedGoesFirstAndTheBoundHolds) {
  const int64_t entry = ResultCache::EntryBytes("k0", Text("x"));
  ResultCache cache(3 * entry);  // room for three entries
  for (int i = 0; i < 3; ++i) cache.Insert("k" + std::to_string(i), Text("x"));
  ASSERT_TRUE(cache.Lookup("k0"));  // k0 is now the most recent; k1 the least
  cache.Insert("k3", Text("x"));
  EXPECT_FALSE(cache.Lookup("k1"));
  EXPECT_TRUE(cache.Lookup("k0"));
  EXPECT_TRUE(cache.Lookup("k2"));
  EXPECT_TRUE(cache.Lookup("k3"));
  const ResultCache::Stats s = cache.stats();
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.entries, 3);
  EXPECT_LE(s.bytes, s.capacity_bytes);
  for (int i = 4; i < 100; ++i) {
    cache.Insert("k" + std::to_string(i), Text(std::string(i % 7, 'y')));
    ASSERT_LE(cache.stats().bytes, 3 * entry) << i;
  }
}

TEST(ResultCacheTest, AnEntryLargerThanTheCacheIsNotStored) {
  ResultCache cache(100);
  cache.Insert("big", Text(std::string(1000, 'z')));
  EXPECT_EQ(cache.stats().entries, 0);
  EXPECT_FALSE(cache.Lookup("big"));
}

TEST(ResultCacheTest, StoringAKeyAgainReplacesIt) {
  ResultCache cache(1 << 20);
  cache.Insert("a", Text("one"));
  cache.Insert("a", Text("two"));
  EXPECT_EQ(cache.stats().entries, 1);
  EXPECT_EQ(cache.stats().bytes, ResultCache::EntryBytes("a", Text("two")));
  EXPECT_EQ(cache.Lookup("a")->hypotheses[0].text, "two");
}

TEST(ResultCacheTest, AModelReloadedUnderItsNameHasOtherKeys) {
  // --model_config replaced the model behind a name: the old one's translations must not answer.
  auto before = std::make_shared<LoadedModel>();
  before->name = "m";
  before->generation = 7;
  auto after = std::make_shared<LoadedModel>();
  after->name = "m";
  after->generation = 8;
  PreparedRequest p;
  p.model = before;
  const std::string old_key = CacheKey(p, "hola");
  p.model = after;
  EXPECT_NE(CacheKey(p, "hola"), old_key);
  EXPECT_EQ(CacheKey(p, "hola"), CacheKey(p, "hola"));
}

TEST(ResultCacheTest, AResultWithoutScoresDoesNotAnswerOneWithScores) {
  // Greedy without scores leaves Hypothesis::score at 0.
  auto model = std::make_shared<LoadedModel>();
  model->name = "m";
  PreparedRequest p;
  p.model = model;
  p.search.scores = false;
  const std::string unscored = CacheKey(p, "hola");
  p.search.scores = true;
  EXPECT_NE(CacheKey(p, "hola"), unscored);
}

}  // namespace
}  // namespace glossa::server
