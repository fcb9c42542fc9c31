// The file API's pieces: the multipart/form-data parser (strict, RFC 7578), the store of
// translated files (expiry, total size, names), and the download names.
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/file_api/file_store.h"
#include "server/file_api/multipart.h"
#include "server/file_api/translate_file.h"

namespace glossa::server {
namespace {

constexpr char kType[] = "multipart/form-data; boundary=XyZ";

TEST(MultipartTest, ReadsFieldsAndFiles) {
  const std::string body =
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"notes.srt\"\r\n"
      "Content-Type: application/x-subrip\r\n\r\nline one\r\nline two\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"source\"\r\n\r\nes\r\n"
      "--XyZ\r\ncontent-disposition: FORM-DATA; name=target\r\n\r\n\r\n--XyZ--\r\n";
  auto parts = ParseMultipart(kType, body);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ((*parts)[0].name, "file");
  EXPECT_TRUE((*parts)[0].has_file_name);
  EXPECT_EQ((*parts)[0].file_name, "notes.srt");
  EXPECT_EQ((*parts)[0].content_type, "application/x-subrip");
  EXPECT_EQ((*parts)[0].data, "line one\r\nline two");
  EXPECT_EQ((*parts)[1].name, "source");
  EXPECT_FALSE((*parts)[1].has_file_name);
  EXPECT_EQ((*parts)[1].data, "es");
  EXPECT_EQ((*parts)[2].name, "target");
  EXPECT_EQ((*parts)[2].data, "");
}

TEST(MultipartTest, QuotedBoundaryPreambleEscapesAndExtendedFileName) {
  const std::string body =
      "ignored preamble\r\n--a b\t\r\nContent-Disposition: form-data; name=\"f\\\"x\"; "
      "filename=\"fallback.txt\"; filename*=UTF-8''ni%C3%B1o.txt\r\n\r\nx--a b\r\n--a b--tail";
  auto parts = ParseMultipart("Multipart/Form-Data; charset=utf-8; boundary=\"a b\"", body);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].name, "f\"x");
  EXPECT_EQ((*parts)[0].file_name, "ni\xC3\xB1o.txt");
  EXPECT_EQ((*parts)[0].data, "x--a b");  // a boundary not at a line start is data
}

TEST(MultipartTest, EmptyFormHasNoParts) {
  auto parts = ParseMultipart(kType, "--XyZ--\r\n");
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_TRUE(parts->empty());
}

TEST(MultipartTest, RefusesMalformedBodies) {
  const std::string ok_part = "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"application/json", ok_part + "--XyZ--"},
      {"multipart/form-data", ok_part + "--XyZ--"},
      {"multipart/form-data; boundary=", ok_part + "--XyZ--"},
      {"multipart/form-data; boundary=\"XyZ", ok_part + "--XyZ--"},
      {std::string("multipart/form-data; boundary=") + std::string(71, 'b'), "--" + std::string(71, 'b') + "--"},
      {kType, ""},
      {kType, "no boundary at all"},
      {kType, ok_part},                                        // no final boundary
      {kType, ok_part + "--XyZ"},                              // nor a close delimiter
      {kType, "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv"},  // data unended
      {kType, "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\nv\r\n--XyZ--"},
      {kType, "--XyZ\r\nno colon here\r\n\r\nv\r\n--XyZ--"},
      {kType, "--XyZ\r\nContent-Type: text/plain\r\n\r\nv\r\n--XyZ--"},  // no disposition
      {kType, "--XyZ\r\nContent-Disposition: attachment; name=\"a\"\r\n\r\nv\r\n--XyZ--"},
      {kType, "--XyZ\r\nContent-Disposition: form-data; filename=\"a\"\r\n\r\nv\r\n--XyZ--"},
      {kType, "--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\nv\r\n--XyZ--"},
      {kType, "--XyZ\r\n\r\nv\r\n--XyZ--"},                   // a part without headers
      {kType, "--XyZjunk\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XyZ--"},
      {kType, "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n" +
                  std::string(9000, 'h') + "\r\n\r\nv\r\n--XyZ--"},
  };
  for (const auto& [type, body] : cases) {
    auto parts = ParseMultipart(type, body);
    EXPECT_FALSE(parts.ok()) << "accepted: " << type << " | " << body.substr(0, 120);
    if (!parts.ok()) {
      EXPECT_EQ(parts.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(MultipartTest, BoundsTheNumberOfParts) {
  std::string body;
  for (int i = 0; i < 5; ++i) {
    body += "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n";
  }
  body += "--XyZ--";
  EXPECT_TRUE(ParseMultipart(kType, body, 5).ok());
  EXPECT_FALSE(ParseMultipart(kType, body, 4).ok());
}

TEST(FileStoreTest, KeepsFilesUntilTheyExpire) {
  FileStore store(absl::Minutes(30), 1 << 20);
  const absl::Time t0 = absl::FromUnixSeconds(1000000);
  auto name = store.Put({"a.en.txt", "hello"}, t0);
  ASSERT_TRUE(name.ok()) << name.status();
  auto file = store.Get(*name, t0 + absl::Minutes(29));
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->file_name, "a.en.txt");
  EXPECT_EQ(file->bytes, "hello");
  EXPECT_EQ(store.Get(*name, t0 + absl::Minutes(30)), nullptr);
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.bytes(), 0);
  EXPECT_EQ(store.Get("00000000000000000000000000000000", t0), nullptr);
}

TEST(FileStoreTest, DropsTheOldestPastTheTotalSize) {
  FileStore store(absl::Hours(1), 10);
  const absl::Time t0 = absl::FromUnixSeconds(1000000);
  auto a = store.Put({"a", "aaaa"}, t0);
  auto b = store.Put({"b", "bbbb"}, t0 + absl::Seconds(1));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(store.bytes(), 8);
  auto c = store.Put({"c", "cccc"}, t0 + absl::Seconds(2));  // 12 > 10: a goes
  ASSERT_TRUE(c.ok());
  const absl::Time later = t0 + absl::Seconds(3);
  EXPECT_EQ(store.Get(*a, later), nullptr);
  EXPECT_NE(store.Get(*b, later), nullptr);
  EXPECT_NE(store.Get(*c, later), nullptr);
  EXPECT_EQ(store.bytes(), 8);
  // A file larger than the whole store is refused, and nothing is dropped for it.
  auto huge = store.Put({"h", std::string(11, 'h')}, later);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(store.Get(*b, later), nullptr);
}

TEST(FileStoreTest, NamesAre128RandomBitsInHex) {
  FileStore store(absl::Hours(1), 1 << 20);
  std::set<std::string> names;
  int ones = 0;
  for (int i = 0; i < 200; ++i) {
    auto name = store.Put({"f", "x"}, absl::FromUnixSeconds(1000000));
    ASSERT_TRUE(name.ok());
    ASSERT_EQ(name->size(), 32u);
    for (char c : *name) {
      ASSERT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << *name;
      const int v = c <= '9' ? c - '0' : c - 'a' + 10;
      ones += __builtin_popcount(v);
    }
    names.insert(*name);
  }
  EXPECT_EQ(names.size(), 200u);
  // 25600 random bits: half are ones, give or take a few standard deviations (80).
  EXPECT_NEAR(ones, 12800, 600);
}

TEST(FileNamesTest, TargetGoesBeforeTheExtension) {
  EXPECT_EQ(TranslatedFileName("notes.srt", "en"), "notes.en.srt");
  EXPECT_EQ(TranslatedFileName("a.es.md", "en"), "a.es.en.md");
  EXPECT_EQ(TranslatedFileName("dir/sub\\page.html", "de"), "page.de.html");
  EXPECT_EQ(TranslatedFileName("README", "en"), "README.en");
  EXPECT_EQ(TranslatedFileName(".hidden", "en"), ".hidden.en");
  EXPECT_EQ(ContentTypeFor("x.VTT"), "text/vtt; charset=utf-8");
  EXPECT_TRUE(absl::StartsWith(ContentTypeFor("x.htm"), "text/html"));
  EXPECT_EQ(ContentTypeFor("x.bin"), "application/octet-stream");
}

}  // namespace
}  // namespace glossa::server
