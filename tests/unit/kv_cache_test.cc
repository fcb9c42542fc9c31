#include "layers/kv_cache.h"

#include "gtest/gtest.h"

namespace glossa {
namespace {

TEST(KvBlockPoolTest, ReusesFreedBlocksAndSaysWhenFull) {
  KvBlockPool pool(16, 2);
  float* a = pool.Allocate();
  float* b = pool.Allocate();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(pool.Allocate(), nullptr);  // no room
  pool.Free(a);
  EXPECT_EQ(pool.Allocate(), a);
  EXPECT_EQ(pool.blocks_allocated(), 2);
  EXPECT_EQ(pool.blocks_in_use(), 2);
}

TEST(KvCacheTest, RowsAreDistinctAndSurviveGrowth) {
  const int layers = 2, d = 4, slots = 3;
  KvBlockPool pool(KvCache::BlockFloats(layers, d), 1000);
  {
    KvCache cache(&pool, layers, d, slots);
    ASSERT_TRUE(cache.Reserve(40).ok());
    for (int l = 0; l < layers; ++l)
      for (int s = 0; s < slots; ++s)
        for (int p = 0; p < 40; ++p) {
          cache.Key(l, s, p)[0] = l * 10000 + s * 1000 + p;
          cache.Value(l, s, p)[d - 1] = -(l * 10000 + s * 1000 + p);
        }
    ASSERT_TRUE(cache.Reserve(100).ok());
    for (int l = 0; l < layers; ++l)
      for (int s = 0; s < slots; ++s)
        for (int p = 0; p < 40; ++p) {
          ASSERT_EQ(cache.Key(l, s, p)[0], l * 10000 + s * 1000 + p);
          ASSERT_EQ(cache.Value(l, s, p)[d - 1], -(l * 10000 + s * 1000 + p));
        }
    EXPECT_EQ(cache.bytes(), slots * 7 * KvCache::BlockFloats(layers, d) * 4);
  }
  EXPECT_EQ(pool.blocks_in_use(), 0);  // the cache gave its blocks back
}

TEST(KvCacheTest, ReserveFailsCleanlyWhenThePoolIsFull) {
  KvBlockPool pool(KvCache::BlockFloats(1, 2), 2);
  KvCache cache(&pool, 1, 2, 1);
  EXPECT_TRUE(cache.Reserve(32).ok());
  const absl::Status s = cache.Reserve(33);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace glossa
