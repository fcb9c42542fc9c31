#include "server/batch/io/input.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace glossa::batch {
namespace {

std::string WriteFile(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

TEST(BatchInputTest, ScanCountsLinesLikeTheReader) {
  struct Case {
    std::string contents;
    int64_t lines;
  };
  for (const Case& c : {Case{"", 0}, Case{"\n", 1}, Case{"a", 1}, Case{"a\n", 1}, Case{"a\nb", 2},
                        Case{"a\r\n\r\nb\n", 3}, Case{"\n\n\n", 3}}) {
    const std::string path = WriteFile("scan.txt", c.contents);
    absl::StatusOr<InputSize> size = ScanInput(path);
    ASSERT_TRUE(size.ok());
    EXPECT_EQ(size->lines, c.lines) << c.contents;
    EXPECT_EQ(size->bytes, static_cast<int64_t>(c.contents.size()));
    LineReader reader;
    ASSERT_TRUE(reader.Open(path, 0, 0).ok());
    std::string line;
    bool had_newline;
    int64_t read = 0;
    while (reader.Next(&line, &had_newline)) ++read;
    EXPECT_EQ(read, c.lines) << c.contents;
    EXPECT_EQ(reader.offset(), size->bytes);
  }
  EXPECT_EQ(ScanInput("/nonexistent/x").status().code(), absl::StatusCode::kNotFound);
}

TEST(BatchInputTest, ReaderTracksOffsetsAndNewlines) {
  const std::string path = WriteFile("reader.txt", "uno\r\ndos\ntres");
  LineReader reader;
  ASSERT_TRUE(reader.Open(path, 0, 0).ok());
  std::string line;
  bool had_newline;
  ASSERT_TRUE(reader.Next(&line, &had_newline));
  EXPECT_EQ(line, "uno\r");
  EXPECT_TRUE(had_newline);
  EXPECT_EQ(reader.offset(), 5);
  EXPECT_EQ(reader.line(), 1);
  LineReader resumed;  // from a journaled offset
  ASSERT_TRUE(resumed.Open(path, 5, 1).ok());
  ASSERT_TRUE(resumed.SkipTo(2));
  ASSERT_TRUE(resumed.Next(&line, &had_newline));
  EXPECT_EQ(line, "tres");
  EXPECT_FALSE(had_newline);
  EXPECT_EQ(resumed.line(), 3);
  EXPECT_FALSE(resumed.Next(&line, &had_newline));
}

TEST(BatchInputTest, ParseShard) {
  EXPECT_EQ(ParseShard("")->count, 1);
  EXPECT_EQ(ParseShard("2/3")->index, 2);
  EXPECT_EQ(ParseShard("2/3")->count, 3);
  for (const char* bad : {"3/3", "-1/3", "1/0", "1", "a/b", "1/2/3", "1/"}) {
    EXPECT_FALSE(ParseShard(bad).ok()) << bad;
  }
}

TEST(BatchInputTest, ShardsAreContiguousAndCoverEveryLine) {
  for (int64_t total : {0, 1, 2, 5, 100, 5001}) {
    for (int count : {1, 2, 3, 7}) {
      int64_t next = 0;
      for (int k = 0; k < count; ++k) {
        const LineRange r = ShardLines({k, count}, total);
        EXPECT_EQ(r.first, next) << total << " " << k << "/" << count;
        EXPECT_LE(r.size(), total / count + 1);
        EXPECT_GE(r.size(), total / count);
        next = r.end;
      }
      EXPECT_EQ(next, total);
    }
  }
}

}  // namespace
}  // namespace glossa::batch
