// Stored glossaries: the entry formats (TSV, CSV, JSON, messages) with every kind of bad input
// named by its line or entry, and the store (create, list, find, delete, limits, the files on
// disk: reopened, a leftover .tmp removed, a damaged file skipped).
#include "server/glossaries/glossary_store.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/glossaries/glossary_file.h"
#include "server/glossaries/glossary_formats.h"

namespace glossa::server {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// source -> targets, in order.
using Pairs = std::vector<std::pair<std::string, std::vector<std::string>>>;

Pairs AsPairs(const std::vector<v1::GlossaryEntry>& entries) {
  Pairs pairs;
  for (const auto& e : entries)
    pairs.push_back({e.source(), {e.targets().begin(), e.targets().end()}});
  return pairs;
}

Pairs Parse(absl::string_view text, GlossaryFormat format, const GlossaryLimits& limits = {}) {
  auto entries = ParseGlossaryEntries(text, format, limits);
  EXPECT_TRUE(entries.ok()) << entries.status();
  return entries.ok() ? AsPairs(*entries) : Pairs();
}

// The error message of parsing `text`; the test fails unless it is INVALID_ARGUMENT.
std::string Error(absl::string_view text, GlossaryFormat format,
                  const GlossaryLimits& limits = {}) {
  auto entries = ParseGlossaryEntries(text, format, limits);
  EXPECT_EQ(entries.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(entries.status().message());
}

v1::GlossaryEntry Entry(const std::string& source, std::vector<std::string> targets) {
  v1::GlossaryEntry entry;
  entry.set_source(source);
  for (auto& t : targets) entry.add_targets(t);
  return entry;
}

std::string MessageError(const std::vector<v1::GlossaryEntry>& entries,
                         const GlossaryLimits& limits = {}) {
  absl::Status status = ValidateGlossaryEntries(entries, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

constexpr auto kTsv = GlossaryFormat::kTsv;
constexpr auto kCsv = GlossaryFormat::kCsv;
constexpr auto kJson = GlossaryFormat::kJson;

TEST(GlossaryFormatsTest, TsvRepeatedSourcesAddAlternativesInOrder) {
  const std::string text = "\xEF\xBB\xBFluz\tlight\r\n\n  Dios \t God\nluz\tbrightness\n";
  EXPECT_EQ(Parse(text, kTsv), (Pairs{{"luz", {"light", "brightness"}}, {"Dios", {"God"}}}));
}

TEST(GlossaryFormatsTest, TsvBadLinesAreNamed) {
  EXPECT_EQ(Error("a\tb\n\tc\n", kTsv), "line 2: the source term is empty");
  EXPECT_EQ(Error("a\t \n", kTsv), "line 1: the target term is empty");
  EXPECT_THAT(Error("a\tb\n\nabc\n", kTsv), HasSubstr("line 3: 1 column;"));
  EXPECT_THAT(Error("a\tb\tc\n", kTsv), HasSubstr("line 1: 3 columns;"));
  EXPECT_EQ(Error("a\tb\nc\t\xff\n", kTsv), "line 2: the target term is not valid UTF-8");
  EXPECT_EQ(Error("\xC0\xAF\tb\n", kTsv),
            "line 1: the source term is not valid UTF-8");  // overlong
  EXPECT_EQ(Error("\xED\xA0\x80\tb\n", kTsv), "line 1: the source term is not valid UTF-8");
  EXPECT_EQ(Error("a\xF4\x90\x80\x80\tb\n", kTsv), "line 1: the source term is not valid UTF-8");
  EXPECT_EQ(Error("a\tb\nx\ty\na\tb\n", kTsv),
            "line 3: the pair 'a' -> 'b' is given twice (first at line 1)");
  EXPECT_EQ(Error("a\x01z\tb\n", kTsv),
            "line 1: the source term holds a control character (U+0001)");
  EXPECT_EQ(Error("a\tb\xC2\x85\n", kTsv),  // C1: NEL
            "line 1: the target term holds a control character (U+0085)");
  EXPECT_EQ(Error("a\tb\xE2\x80\xA8\n", kTsv),
            "line 1: the target term holds a control character (U+2028)");
  EXPECT_EQ(Error("a\tb\n" + std::string(257, 's') + "\tb\n", kTsv),
            "line 2: the source term is 257 bytes; a term is at most 256");
  EXPECT_EQ(Error("a\t" + std::string(300, 't') + "\n", kTsv),
            "line 1: the target term is 300 bytes; a term is at most 256");
  EXPECT_EQ(Error("\n\r\n", kTsv), "the glossary has no entries");
}

TEST(GlossaryFormatsTest, TheLimitsOfAGlossaryNameTheLine) {
  GlossaryLimits limits;
  limits.max_entries = 2;
  EXPECT_EQ(Error("a\tb\nc\td\na\tz\ne\tf\n", kTsv, limits),
            "line 4: more than 2 entries (the limit of a glossary)");
  limits = GlossaryLimits();
  // "abc" + "def" + "gh" + "ij" = 10 bytes and four terms: fits; one byte more does not.
  limits.max_bytes = 10 + 4 * kTermOverheadBytes;
  EXPECT_EQ(Parse("abc\tdef\ngh\tij\n", kTsv, limits).size(), 2u);
  EXPECT_EQ(Error("abc\tdef\ngh\tijk\n", kTsv, limits),
            "line 2: the glossary's terms take more than 1034 bytes in memory (the limit of a "
            "glossary; each term counts 256 bytes besides its own)");
  limits.max_bytes = 20;  // a text over the limit is refused before it is parsed
  EXPECT_EQ(Error("abc\tdef\ngh\tij\nklm\tnop\n", kTsv, limits),
            "the text is 22 bytes; a glossary's is at most 20");
  limits = GlossaryLimits();
  limits.max_targets = 2;  // many targets for one term: refused as they come
  EXPECT_EQ(Error("{\"a\": [\"b\", \"c\", \"d\"]}", kJson, limits),
            "line 1: the source term 'a' has more than 2 target terms (the limit of an entry)");
  limits = GlossaryLimits();
  limits.max_term_bytes = 3;
  EXPECT_EQ(Error("abc\tdefg\n", kTsv, limits),
            "line 1: the target term is 4 bytes; a term is at most 3");
}

TEST(GlossaryFormatsTest, CsvFollowsRfc4180) {
  const std::string text =
      "luz,light\r\n\"Dios, el\",\"God \"\"the\"\"\"\n luz , \"brightness\" \n\n";
  EXPECT_EQ(Parse(text, kCsv),
            (Pairs{{"luz", {"light", "brightness"}}, {"Dios, el", {"God \"the\""}}}));
}

TEST(GlossaryFormatsTest, CsvBadRecordsAreNamed) {
  EXPECT_THAT(Error("a,b\nc,d,e\n", kCsv), HasSubstr("line 2: 3 fields;"));
  EXPECT_THAT(Error("a,b\nc\n", kCsv), HasSubstr("line 2: 1 field;"));
  EXPECT_EQ(Error("a,b\n\"c,d\n\n", kCsv), "line 2: a quoted field is not closed");
  EXPECT_THAT(Error("a,b\nc\"d,e\n", kCsv), HasSubstr("line 2: a quote inside an unquoted field"));
  EXPECT_EQ(Error("\"a\"x,b\n", kCsv), "line 1: text after a closing quote");
  EXPECT_EQ(Error("a,b\n,c\n", kCsv), "line 2: the source term is empty");
  EXPECT_EQ(Error("a,b\nc,\"\"\n", kCsv), "line 2: the target term is empty");
  EXPECT_EQ(Error("\"a\nb\",c\n", kCsv),
            "line 1: the source term holds a control character (U+000A)");
  EXPECT_EQ(Error("a,b\nx,y\na,b\n", kCsv),
            "line 3: the pair 'a' -> 'b' is given twice (first at line 1)");
  EXPECT_EQ(Error("a,b\nc,\xE9\n", kCsv), "line 2: the target term is not valid UTF-8");
}

TEST(GlossaryFormatsTest, JsonTakesStringsAndLists) {
  EXPECT_EQ(Parse("{\"luz\": \"light\", \"Dios\": [\"God\", \"Lord\"]}", kJson),
            (Pairs{{"luz", {"light"}}, {"Dios", {"God", "Lord"}}}));
}

TEST(GlossaryFormatsTest, JsonBadEntriesAreNamedByLine) {
  EXPECT_EQ(Error("{\n \"a\": \"b\",\n \"c\": \"\"\n}", kJson), "line 3: the target term is empty");
  EXPECT_EQ(Error("{\n \"a\": \"b\",\n \"a\": \"c\"\n}", kJson),
            "line 3: the source term 'a' comes again (first at line 2): list all its targets in "
            "one entry");
  EXPECT_EQ(Error("{\n \"a\": [\"b\",\n  \"b\"]\n}", kJson),
            "line 3: the pair 'a' -> 'b' is given twice (first at line 2)");
  EXPECT_EQ(Error("{\"a\": \"b\",\n \"c\": []}", kJson),
            "line 2: the source term 'c' has no target term");
  EXPECT_THAT(Error("{\"a\": \"b\",\n \"c\": 3}", kJson),
              HasSubstr("line 2: the targets of a source term are a string or a list of strings, "
                        "not a number"));
  EXPECT_THAT(Error("{\"a\":\n {\"b\": \"c\"}}", kJson), HasSubstr("line 1: the targets"));
  EXPECT_EQ(Error("{\"a\": \"b\\u0007\"}", kJson),
            "line 1: the target term holds a control character (U+0007)");
  EXPECT_EQ(Error("[\"a\"]", kJson), "line 1: the glossary is not a JSON object");
  EXPECT_EQ(Error("{}", kJson), "the glossary has no entries");
  EXPECT_THAT(Error("{\"a\": \"b\",\n \"c\" \"d\"}", kJson),
              AllOf(HasSubstr("invalid JSON"), HasSubstr("line 2")));
  EXPECT_THAT(Error("{\"a\": \"b\",\n \"c\": \"\xff\"}", kJson),
              AllOf(HasSubstr("invalid JSON"), HasSubstr("line 2")));
  EXPECT_EQ(Error("{\"a\": \"" + std::string(257, 't') + "\"}", kJson),
            "line 1: the target term is 257 bytes; a term is at most 256");
}

TEST(GlossaryFormatsTest, MessagesAreCheckedByTheSameRules) {
  EXPECT_TRUE(ValidateGlossaryEntries({Entry("a", {"b", "c"}), Entry("d", {"e"})}).ok());
  EXPECT_EQ(MessageError({Entry("a", {"b"}), Entry("", {"c"})}),
            "entries[1]: the source term is empty");
  EXPECT_EQ(MessageError({Entry("a", {"b", ""})}),
            "entries[0].targets[1]: the target term is empty");
  EXPECT_EQ(MessageError({Entry("a", {})}), "entries[0]: the source term 'a' has no target term");
  EXPECT_EQ(MessageError({Entry("a", {"b", "b"})}),
            "entries[0].targets[1]: the pair 'a' -> 'b' is given twice (first at "
            "entries[0].targets[0])");
  EXPECT_THAT(MessageError({Entry("a", {"b"}), Entry("x", {"y"}), Entry("a", {"c"})}),
              HasSubstr("entries[2]: the source term 'a' comes again (first at entries[0])"));
  EXPECT_EQ(MessageError({Entry(" a", {"b"})}),
            "entries[0]: the source term starts or ends with a space");
  EXPECT_EQ(MessageError({Entry("a", {"b\t"})}),
            "entries[0].targets[0]: the target term holds a control character (U+0009)");
  EXPECT_EQ(MessageError({Entry("a", {"\xff"})}),
            "entries[0].targets[0]: the target term is not valid UTF-8");
  EXPECT_EQ(MessageError({Entry(std::string(257, 'a'), {"b"})}),
            "entries[0]: the source term is 257 bytes; a term is at most 256");
  GlossaryLimits limits;
  limits.max_entries = 1;
  EXPECT_EQ(MessageError({Entry("a", {"b"}), Entry("c", {"d"})}, limits),
            "entries[1]: more than 1 entries (the limit of a glossary)");
  EXPECT_EQ(MessageError({}), "the glossary has no entries");
}

TEST(GlossaryFormatsTest, ToTsvParsesBack) {
  const std::vector<v1::GlossaryEntry> entries = {Entry("luz", {"light", "brightness"}),
                                                  Entry("Dios, el", {"God \"the\""})};
  const std::string tsv = ToTsv(entries);
  EXPECT_EQ(tsv, "luz\tlight\nluz\tbrightness\nDios, el\tGod \"the\"\n");
  EXPECT_EQ(Parse(tsv, kTsv), AsPairs(entries));
}

TEST(GlossaryFormatsTest, FormatNamesAndExtensions) {
  EXPECT_EQ(*ParseGlossaryFormat("TSV"), kTsv);
  EXPECT_EQ(*ParseGlossaryFormat("csv"), kCsv);
  EXPECT_EQ(*ParseGlossaryFormat("json"), kJson);
  EXPECT_FALSE(ParseGlossaryFormat("xml").ok());
  EXPECT_EQ(*GlossaryFormatOfPath("dir.json/terms.tsv"), kTsv);
  EXPECT_EQ(*GlossaryFormatOfPath("terms.tab"), kTsv);
  EXPECT_EQ(*GlossaryFormatOfPath("a/terms.CSV"), kCsv);
  EXPECT_EQ(*GlossaryFormatOfPath("terms.json"), kJson);
  EXPECT_FALSE(GlossaryFormatOfPath("terms.txt").ok());
  EXPECT_FALSE(GlossaryFormatOfPath("a.tsv/terms").ok());
}

// The store.

class TempDir {
 public:
  TempDir() {
    std::string pattern = testing::TempDir() + "glossary_store_test.XXXXXX";
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::vector<std::string> Files() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
};

v1::CreateGlossaryRequest Request(const std::string& name,
                                  const std::string& tsv = "luz\tlight\n") {
  v1::CreateGlossaryRequest request;
  request.set_name(name);
  request.set_source_language("es");
  request.set_target_language("en");
  request.set_entries_text(tsv);
  request.set_entries_format("tsv");
  return request;
}

// Four threads create ten glossaries each, each call also looking one up; the number
// created (the rest must be RESOURCE_EXHAUSTED).
int CreateFromFourThreads(GlossaryStore* store) {
  std::atomic<int> created{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        auto info = store->Create(Request("g"));
        if (info.ok()) {
          ++created;
        } else {
          EXPECT_EQ(info.status().code(), absl::StatusCode::kResourceExhausted);
        }
        EXPECT_EQ(store->Find("nothing").status().code(), absl::StatusCode::kNotFound);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return created.load();
}

std::unique_ptr<GlossaryStore> OpenStore(const std::string& dir, GlossaryLimits limits = {}) {
  auto store = GlossaryStore::Open(dir, limits);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

std::vector<std::string> Names(const GlossaryStore& store) {
  std::vector<std::string> names;
  for (const auto& info : store.List()) names.push_back(info.name());
  return names;
}

TEST(GlossaryStoreTest, CreateListFindDelete) {
  auto store = OpenStore("");
  auto a = store->Create(Request("first", "luz\tlight\nluz\tbrightness\nDios\tGod\n"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->name(), "first");
  EXPECT_EQ(a->source_language(), "es");
  EXPECT_EQ(a->target_language(), "en");
  EXPECT_EQ(a->entry_count(), 2u);
  EXPECT_THAT(a->glossary_id(), ::testing::MatchesRegex("[0-9a-f]{32}"));
  EXPECT_THAT(a->creation_time(),
              ::testing::MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{6}Z"));
  v1::CreateGlossaryRequest messages = Request("second", "");
  messages.clear_entries_format();
  *messages.add_entries() = Entry("agua", {"water"});
  auto b = store->Create(messages);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(a->glossary_id(), b->glossary_id());
  EXPECT_THAT(Names(*store), ElementsAre("first", "second"));

  auto found = store->Find(a->glossary_id());
  ASSERT_TRUE(found.ok());
  EXPECT_EQ((*found)->info.SerializeAsString(), a->SerializeAsString());
  EXPECT_EQ(AsPairs((*found)->entries),
            (Pairs{{"luz", {"light", "brightness"}}, {"Dios", {"God"}}}));

  ASSERT_TRUE(store->Delete(a->glossary_id()).ok());
  EXPECT_THAT(Names(*store), ElementsAre("second"));
  auto gone = store->Find(a->glossary_id());
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(gone.status().message(), HasSubstr(a->glossary_id()));
  absl::Status again = store->Delete(a->glossary_id());
  EXPECT_EQ(again.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(again.message(), HasSubstr(a->glossary_id()));
  EXPECT_EQ(store->Find("../../etc/passwd").status().code(), absl::StatusCode::kNotFound);
}

TEST(GlossaryStoreTest, CreateChecksTheRequest) {
  auto store = OpenStore("");
  const auto error = [&](const v1::CreateGlossaryRequest& request) {
    auto info = store->Create(request);
    EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(info.status().message());
  };
  EXPECT_EQ(error(Request("")), "name is required");
  EXPECT_THAT(error(Request(std::string(257, 'n'))), HasSubstr("name is 257 bytes"));
  EXPECT_EQ(error(Request("a\nb")), "name holds a control character (U+000A)");
  v1::CreateGlossaryRequest r = Request("g");
  r.clear_source_language();
  EXPECT_THAT(error(r), HasSubstr("source_language is required"));
  r = Request("g");
  r.set_target_language("e n");
  EXPECT_THAT(error(r), HasSubstr("target_language 'e n' is not a language code"));
  r = Request("g");
  *r.add_entries() = Entry("a", {"b"});
  EXPECT_EQ(error(r), "give the entries as entries or as entries_text, not both");
  EXPECT_THAT(error(Request("g", "")), HasSubstr("the glossary has no entries"));
  r = Request("g");
  r.set_entries_format("xml");
  EXPECT_THAT(error(r), HasSubstr("entries_format: unknown glossary format 'xml'"));
  EXPECT_EQ(error(Request("g", "a\tb\nc\n")),
            "entries_text (tsv): line 2: 1 column; a line is a source term, a tab, and its "
            "target term");
  r = Request("g", "a,b\n,c\n");
  r.set_entries_format("csv");
  EXPECT_EQ(error(r), "entries_text (csv): line 2: the source term is empty");
  r = Request("g", "a\tb\n");
  r.clear_entries_format();  // tsv by default
  EXPECT_TRUE(store->Create(r).ok());
  EXPECT_EQ(store->List().size(), 1u);
}

TEST(GlossaryStoreTest, TheStoreIsBoundedAndAFullStoreSaysSo) {
  GlossaryLimits limits;
  limits.max_glossaries = 2;
  auto store = OpenStore("", limits);
  auto a = store->Create(Request("a"));
  ASSERT_TRUE(store->Create(Request("b")).ok());
  auto c = store->Create(Request("c"));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(c.status().message(), HasSubstr("2 glossaries"));
  ASSERT_TRUE(store->Delete(a->glossary_id()).ok());
  EXPECT_TRUE(store->Create(Request("c")).ok());
  limits = GlossaryLimits();
  limits.max_entries = 1;
  store = OpenStore("", limits);
  EXPECT_EQ(store->Create(Request("g", "a\tb\nc\td\n")).status().message(),
            "entries_text (tsv): line 2: more than 1 entries (the limit of a glossary)");
}

// "luz\tlight": two terms of 3 and 5 bytes, each counting kTermOverheadBytes more.
constexpr int64_t kLuzLightBytes = 3 + 5 + 2 * kTermOverheadBytes;

TEST(GlossaryStoreTest, TheStoresBytesAreBoundedAsAGlossarysAre) {
  GlossaryLimits limits;
  limits.max_bytes = kLuzLightBytes;  // "luz\tlight" is as big as one glossary may be
  limits.max_store_bytes = 2 * kLuzLightBytes + 100;
  auto store = OpenStore("", limits);
  EXPECT_EQ(store->Create(Request("g", "luz\tlights\n")).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto a = store->Create(Request("a"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(GlossaryHeldBytes((*store->Find(a->glossary_id()))->entries), kLuzLightBytes);
  EXPECT_EQ(store->HeldBytes(), kLuzLightBytes);
  ASSERT_TRUE(store->Create(Request("b")).ok());
  EXPECT_EQ(store->HeldBytes(), 2 * kLuzLightBytes);
  auto c = store->Create(Request("c"));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(c.status().message(),
            "the stored glossaries hold 1040 bytes in memory and this one needs 520 more (each "
            "term counts its bytes and 256 besides), past the 1140 bytes the server keeps for "
            "them (glossa-server --glossary_store_mb): delete some first");
  EXPECT_EQ(store->HeldBytes(), 2 * kLuzLightBytes);  // a refusal holds nothing
  EXPECT_THAT(Names(*store), ElementsAre("a", "b"));
  ASSERT_TRUE(store->Delete(a->glossary_id()).ok());  // a deletion frees its bytes
  EXPECT_EQ(store->HeldBytes(), kLuzLightBytes);
  EXPECT_TRUE(store->Create(Request("c")).ok());
  EXPECT_THAT(Names(*store), ElementsAre("b", "c"));
}

TEST(GlossaryStoreTest, ConcurrentCreatesNeverPassTheByteBound) {
  GlossaryLimits limits;
  limits.max_store_bytes = 20 * kLuzLightBytes;
  TempDir dir;
  auto store = OpenStore(dir.path(), limits);  // files: each Create writes outside the lock
  EXPECT_EQ(CreateFromFourThreads(store.get()), 20);  // 40 tried
  EXPECT_EQ(store->HeldBytes(), limits.max_store_bytes);
  EXPECT_EQ(dir.Files().size(), 20u);
}

// A directory that holds more than the bound (the flag was lowered): every glossary is loaded
// and served, with a warning, and none is created until enough are deleted.
TEST(GlossaryStoreTest, OpenLoadsEveryGlossaryPastTheByteBound) {
  TempDir dir;
  {
    auto store = OpenStore(dir.path());
    for (const char* name : {"one", "two", "three"}) ASSERT_TRUE(store->Create(Request(name)).ok());
  }
  GlossaryLimits limits;
  limits.max_store_bytes = 2 * kLuzLightBytes;
  testing::internal::CaptureStderr();
  auto store = OpenStore(dir.path(), limits);
  const std::string warnings = testing::internal::GetCapturedStderr();
  EXPECT_THAT(warnings, HasSubstr("hold 1560 bytes in memory, more than the 1040 the store keeps "
                                  "(--glossary_store_mb): all are loaded"));
  EXPECT_THAT(Names(*store), ElementsAre("one", "two", "three"));
  EXPECT_EQ(store->HeldBytes(), 3 * kLuzLightBytes);
  EXPECT_EQ(store->Create(Request("four")).status().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(store->Delete(store->List()[0].glossary_id()).ok());
  EXPECT_EQ(store->Create(Request("four")).status().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(store->Delete(store->List()[0].glossary_id()).ok());
  EXPECT_EQ(store->HeldBytes(), kLuzLightBytes);
  EXPECT_TRUE(store->Create(Request("four")).ok());
  EXPECT_THAT(Names(*store), ElementsAre("three", "four"));
}

TEST(GlossaryStoreTest, ConcurrentCreatesNeverPassTheBound) {
  GlossaryLimits limits;
  limits.max_glossaries = 20;
  TempDir dir;
  auto store = OpenStore(dir.path(), limits);
  EXPECT_EQ(CreateFromFourThreads(store.get()), 20);  // 40 tried
  EXPECT_EQ(dir.Files().size(), 20u);
}

TEST(GlossaryStoreTest, GlossariesOutliveTheStoreOnDisk) {
  TempDir dir;
  std::vector<v1::GlossaryInfo> before;
  std::string deleted;
  {
    auto store = OpenStore(dir.path());
    for (const char* name : {"one", "two", "three", "four"}) {
      ASSERT_TRUE(store->Create(Request(name, "luz\tlight\nluz\tbrightness\nagua\twater\n")).ok());
    }
    deleted = store->List()[1].glossary_id();
    ASSERT_TRUE(store->Delete(deleted).ok());
    before = store->List();
  }
  std::vector<std::string> files;
  for (const auto& info : before) files.push_back(info.glossary_id() + ".json");
  std::sort(files.begin(), files.end());
  EXPECT_EQ(dir.Files(), files);  // a file per glossary, nothing else

  auto store = OpenStore(dir.path());
  const std::vector<v1::GlossaryInfo> after = store->List();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].SerializeAsString(), before[i].SerializeAsString()) << i;
  }
  EXPECT_THAT(Names(*store), ElementsAre("one", "three", "four"));
  EXPECT_EQ(AsPairs((*store->Find(after[0].glossary_id()))->entries),
            (Pairs{{"luz", {"light", "brightness"}}, {"agua", {"water"}}}));
  EXPECT_EQ(store->Find(deleted).status().code(), absl::StatusCode::kNotFound);
  // Creation order survives: a new glossary comes last.
  ASSERT_TRUE(store->Create(Request("five")).ok());
  EXPECT_THAT(Names(*store), ElementsAre("one", "three", "four", "five"));
  EXPECT_LT(after.back().creation_time(), store->List().back().creation_time());
}

TEST(GlossaryStoreTest, OpenRemovesLeftoverTmpAndSkipsDamagedFiles) {
  TempDir dir;
  std::string good_id, whole;
  {
    auto store = OpenStore(dir.path());
    auto good = store->Create(Request("good"));
    ASSERT_TRUE(good.ok());
    good_id = good->glossary_id();
    whole = *ReadWholeFile(dir.path() + "/" + good_id + ".json");
  }
  const auto write = [&](const std::string& name, const std::string& data) {
    std::ofstream(dir.path() + "/" + name, std::ios::binary) << data;
  };
  const std::string id1(32, '1'), id2(32, '2'), id3(32, '3'), id4(32, '4');
  write(good_id + ".json.tmp", whole.substr(0, whole.size() / 2));  // an interrupted write
  write(id1 + ".json", whole.substr(0, whole.size() / 2));          // cut
  write(id2 + ".json", whole);                                      // holds another id
  std::string bad_entry = whole;
  bad_entry.replace(bad_entry.find("light"), 5, "");  // an empty target term
  bad_entry.replace(bad_entry.find(good_id), good_id.size(), id3);
  write(id3 + ".json", bad_entry);
  write("not-an-id.json", whole);
  write("notes.txt", "left alone");

  testing::internal::CaptureStderr();
  auto store = OpenStore(dir.path());
  const std::string warnings = testing::internal::GetCapturedStderr();
  EXPECT_THAT(Names(*store), ElementsAre("good"));
  EXPECT_THAT(warnings, HasSubstr(id1 + ".json: not a JSON object"));
  EXPECT_THAT(warnings, HasSubstr(id2 + ".json: it holds glossary '" + good_id + "'"));
  EXPECT_THAT(warnings, HasSubstr(id3 + ".json: entries[0].targets[0]: the target term is empty"));
  EXPECT_THAT(warnings, HasSubstr("not-an-id.json: its name is not <glossary id>.json"));
  EXPECT_THAT(warnings, HasSubstr(good_id + ".json.tmp, a write that did not finish"));
  // The .tmp is gone; the damaged files stay for the operator to look at.
  std::vector<std::string> left = {id1 + ".json",     id2 + ".json",    id3 + ".json",
                                   good_id + ".json", "not-an-id.json", "notes.txt"};
  std::sort(left.begin(), left.end());
  EXPECT_EQ(dir.Files(), left);
  EXPECT_TRUE(store->Find(good_id).ok());
  EXPECT_TRUE(store->Delete(good_id).ok());
  EXPECT_FALSE(fs::exists(dir.path() + "/" + good_id + ".json"));
}

// A write that fails half way (here: past RLIMIT_FSIZE) leaves no file, neither the glossary's
// nor its .tmp, and the glossary is not created.
TEST(GlossaryStoreTest, AWriteThatFailsHalfWayLeavesNoFile) {
  TempDir dir;
  auto store = OpenStore(dir.path());
  auto first = store->Create(Request("first"));
  ASSERT_TRUE(first.ok());
  std::string big;
  for (int i = 0; i < 500; ++i) big += "term " + std::to_string(i) + "\ttarget\n";
  struct rlimit old_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct rlimit limit = old_limit;
  limit.rlim_cur = 4096;  // the first bytes of the file are written, the rest fail (EFBIG)
  const auto old_handler = signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  testing::internal::CaptureStderr();
  auto failed = store->Create(Request("too big", big));
  const std::string log = testing::internal::GetCapturedStderr();
  setrlimit(RLIMIT_FSIZE, &old_limit);
  signal(SIGXFSZ, old_handler);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(failed.status().message(), ::testing::Not(HasSubstr(dir.path())));
  EXPECT_THAT(log, HasSubstr("cannot write"));
  EXPECT_EQ(dir.Files(), std::vector<std::string>{first->glossary_id() + ".json"});
  EXPECT_THAT(Names(*store), ElementsAre("first"));
  EXPECT_EQ(store->HeldBytes(), GlossaryHeldBytes((*store->Find(first->glossary_id()))->entries));
  EXPECT_TRUE(store->Create(Request("big", big)).ok());
  EXPECT_THAT(Names(*OpenStore(dir.path())), ElementsAre("first", "big"));
}

// Creation order is the order of List, also for glossaries created within a microsecond.
TEST(GlossaryStoreTest, ListKeepsTheCreationOrder) {
  auto store = OpenStore("");
  std::vector<std::string> names;
  for (int i = 0; i < 200; ++i) {
    names.push_back(std::to_string(i));
    ASSERT_TRUE(store->Create(Request(names.back())).ok());
  }
  EXPECT_EQ(Names(*store), names);
  const std::vector<v1::GlossaryInfo> infos = store->List();
  for (size_t i = 1; i < infos.size(); ++i) {
    EXPECT_LT(infos[i - 1].creation_time(), infos[i].creation_time()) << i;
  }
}

// A stored glossary from a clock ahead of this one (or before a clock step back): new glossaries
// still come after it.
TEST(GlossaryStoreTest, ANewGlossaryComesLastEvenAfterTheClockWentBack) {
  TempDir dir;
  Glossary future;
  future.info.set_glossary_id(std::string(32, 'a'));
  future.info.set_name("future");
  future.info.set_source_language("es");
  future.info.set_target_language("en");
  future.info.set_creation_time("2999-01-01T00:00:00.000000Z");
  future.entries = {Entry("luz", {"light"})};
  ASSERT_TRUE(
      WriteFileAtomically(dir.path(), future.info.glossary_id() + ".json", GlossaryToJson(future))
          .ok());
  auto store = OpenStore(dir.path());
  ASSERT_TRUE(store->Create(Request("now")).ok());
  EXPECT_THAT(Names(*store), ElementsAre("future", "now"));
  EXPECT_EQ(store->List().back().creation_time(), "2999-01-01T00:00:00.000001Z");
}

TEST(GlossaryStoreTest, OpenFailsWhereNoDirectoryCanBe) {
  TempDir dir;
  const std::string file = dir.path() + "/file";
  std::ofstream(file) << "x";
  EXPECT_FALSE(GlossaryStore::Open(file).ok());
  EXPECT_FALSE(GlossaryStore::Open(file + "/sub").ok());
  EXPECT_TRUE(GlossaryStore::Open(dir.path() + "/new/sub").ok());  // created
  EXPECT_TRUE(fs::is_directory(dir.path() + "/new/sub"));
}

TEST(GlossaryStoreTest, TheFileFormatRoundTrips) {
  Glossary glossary;
  glossary.info.set_glossary_id(std::string(32, 'a'));
  glossary.info.set_name("ñame \"quoted\"");
  glossary.info.set_source_language("es");
  glossary.info.set_target_language("en");
  glossary.info.set_creation_time("2024-01-02T03:04:05.000006Z");
  glossary.entries = {Entry("luz", {"light", "brightness"}), Entry("Dios", {"God"})};
  glossary.info.set_entry_count(2);
  const std::string json = GlossaryToJson(glossary);
  EXPECT_EQ(std::count(json.begin(), json.end(), '\n'), 4);  // head, an entry a line, end
  auto back = GlossaryFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->info.SerializeAsString(), glossary.info.SerializeAsString());
  EXPECT_EQ(AsPairs(back->entries), AsPairs(glossary.entries));
  EXPECT_FALSE(GlossaryFromJson(json.substr(0, json.size() - 3)).ok());
  EXPECT_FALSE(GlossaryFromJson("{\"format\": 2}").ok());
}

}  // namespace
}  // namespace glossa::server
