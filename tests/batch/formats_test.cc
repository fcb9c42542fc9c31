#include "server/batch/io/formats.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace glossa::batch {
namespace {

FormatOptions Tsv(int column, int output_column = 0) {
  FormatOptions o;
  o.format = Format::kTsv;
  o.column = column;
  o.output_column = output_column;
  return o;
}

FormatOptions Jsonl(std::string field = "text", std::string output_field = "") {
  FormatOptions o;
  o.format = Format::kJsonl;
  o.field = std::move(field);
  o.output_field = std::move(output_field);
  return o;
}

std::string Translate(absl::string_view line, const FormatOptions& o, absl::string_view t) {
  absl::StatusOr<Record> r = ParseRecord(line, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? RenderRecord(*r, t, o) : "";
}

TEST(BatchFormatTest, ParseFormatByNameAndExtension) {
  EXPECT_EQ(*ParseFormat("tsv", "x.txt"), Format::kTsv);
  EXPECT_EQ(*ParseFormat("auto", "data/x.tsv"), Format::kTsv);
  EXPECT_EQ(*ParseFormat("", "x.jsonl"), Format::kJsonl);
  EXPECT_EQ(*ParseFormat("auto", "x.ndjson"), Format::kJsonl);
  EXPECT_EQ(*ParseFormat("auto", "x.es"), Format::kText);
  EXPECT_FALSE(ParseFormat("csv", "x").ok());
}

TEST(BatchFormatTest, LineEndings) {
  EXPECT_EQ(SplitLineEnding("a", true).content, "a");
  EXPECT_EQ(SplitLineEnding("a", true).ending, "\n");
  EXPECT_EQ(SplitLineEnding("a\r", true).content, "a");
  EXPECT_EQ(SplitLineEnding("a\r", true).ending, "\r\n");
  EXPECT_EQ(SplitLineEnding("a", false).ending, "");
  EXPECT_EQ(SplitLineEnding("a\r", false).ending, "\r");
  EXPECT_EQ(SplitLineEnding("a\rb", true).content, "a\rb");
  EXPECT_EQ(SplitLineEnding("", true).content, "");
}

TEST(BatchFormatTest, TextLineIsTheSegment) {
  FormatOptions o;
  absl::StatusOr<Record> r = ParseRecord("Hola, mundo", o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text, "Hola, mundo");
  EXPECT_EQ(RenderRecord(*r, "Hello, world", o), "Hello, world");
}

TEST(BatchFormatTest, TranslationNeverAddsALine) {
  EXPECT_EQ(Translate("x", FormatOptions(), "a\nb\r\nc"), "a b  c");
  EXPECT_EQ(Translate("x\ty", Tsv(1), "a\tb\nc"), "a b c\ty");
}

TEST(BatchFormatTest, EmptyLinesStayEmptyInEveryFormat) {
  for (const FormatOptions& o : {FormatOptions(), Tsv(3), Jsonl()}) {
    absl::StatusOr<Record> r = ParseRecord("", o);
    ASSERT_TRUE(r.ok()) << FormatName(o.format);
    EXPECT_TRUE(r->blank);
    EXPECT_EQ(r->text, "");
    EXPECT_EQ(RenderRecord(*r, "ignored", o), "");
  }
}

TEST(BatchFormatTest, InvalidUtf8IsRefusedWithItsPosition) {
  absl::StatusOr<Record> r = ParseRecord("ab\xff", FormatOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("byte 3"), std::string::npos) << r.status();
  EXPECT_EQ(FirstInvalidUtf8("año ñ €𝄞"), -1);
  EXPECT_EQ(FirstInvalidUtf8("\xc3"), 0);              // truncated
  EXPECT_EQ(FirstInvalidUtf8("a\xc0\x80"), 1);         // overlong
  EXPECT_EQ(FirstInvalidUtf8("\xed\xa0\x80"), 0);      // surrogate
  EXPECT_EQ(FirstInvalidUtf8("\xf4\x90\x80\x80"), 0);  // above U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("ok\xe2\x82"), 2);
}

TEST(BatchFormatTest, TsvReplacesTheColumnAndKeepsTheOthers) {
  EXPECT_EQ(Translate("id1\tHola\tx y", Tsv(2), "Hello"), "id1\tHello\tx y");
  EXPECT_EQ(Translate("Hola\t\t", Tsv(1), "Hello"), "Hello\t\t");  // empty columns kept
}

TEST(BatchFormatTest, TsvOutputColumnAppendsOrSets) {
  EXPECT_EQ(Translate("id\tHola", Tsv(2, 3), "Hello"), "id\tHola\tHello");
  EXPECT_EQ(Translate("id\tHola", Tsv(2, 5), "Hello"), "id\tHola\t\t\tHello");
  EXPECT_EQ(Translate("id\tHola\told", Tsv(2, 3), "Hello"), "id\tHola\tHello");
}

TEST(BatchFormatTest, TsvMissingColumnIsAnError) {
  absl::StatusOr<Record> r = ParseRecord("only one", Tsv(2));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("1 TSV column"), std::string::npos) << r.status();
}

TEST(BatchFormatTest, JsonlReplacesTheFieldKeepingOthersAndTheirOrder) {
  EXPECT_EQ(
      Translate(R"({"id":7,"text":"Hola","meta":{"b":[1,2.5,null],"a":true}})", Jsonl(), "Hello"),
      R"({"id":7,"text":"Hello","meta":{"b":[1,2.5,null],"a":true}})");
}

TEST(BatchFormatTest, JsonlOutputFieldIsAddedAtTheEnd) {
  EXPECT_EQ(Translate(R"({"src":"Hola","id":"x"})", Jsonl("src", "tgt"), "Hello"),
            R"({"src":"Hola","id":"x","tgt":"Hello"})");
}

TEST(BatchFormatTest, JsonlKeepsUnicodeAndEscapes) {
  EXPECT_EQ(Translate(R"({"text":"añ\u00f1\n","k":"\"q\""})", Jsonl(), "“quoted” ñ\n"),
            "{\"text\":\"“quoted” ñ\\n\",\"k\":\"\\\"q\\\"\"}");
}

TEST(BatchFormatTest, JsonlErrorsSayWhatIsWrong) {
  auto message = [](absl::string_view line) {
    absl::StatusOr<Record> r = ParseRecord(line, Jsonl());
    EXPECT_FALSE(r.ok()) << line;
    return std::string(r.status().message());
  };
  EXPECT_NE(message("{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(message("[1,2]").find("not an object"), std::string::npos);
  EXPECT_NE(message(R"({"other":"x"})").find("no field \"text\""), std::string::npos);
  EXPECT_NE(message(R"({"text":3})").find("not a string"), std::string::npos);
  EXPECT_NE(message("{\"text\":\"\xff\"}").find("not valid JSON"), std::string::npos);
  EXPECT_NE(message(R"({"text":"a"} trailing)").find("not valid JSON"), std::string::npos);
}

TEST(BatchFormatTest, JsonlNestedTooDeepIsAnErrorNotACrash) {
  auto nested = [](int depth) {
    return absl::StrCat(R"({"text":"a","x":)", std::string(depth, '['), std::string(depth, ']'),
                        "}");
  };
  EXPECT_EQ(Translate(nested(999), Jsonl(), "b"),
            absl::StrCat(R"({"text":"b","x":)", std::string(999, '['), std::string(999, ']'), "}"));
  absl::StatusOr<Record> r = ParseRecord(nested(1000), Jsonl());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("levels deep"), std::string::npos) << r.status();
  EXPECT_FALSE(ParseRecord(nested(200000), Jsonl()).ok());  // overflowed the stack before
}

TEST(BatchFormatTest, ValidateOptions) {
  EXPECT_TRUE(ValidateFormatOptions(Tsv(1)).ok());
  EXPECT_FALSE(ValidateFormatOptions(Tsv(0)).ok());
  EXPECT_FALSE(ValidateFormatOptions(Tsv(1, -1)).ok());
  EXPECT_FALSE(ValidateFormatOptions(Jsonl("")).ok());
}

}  // namespace
}  // namespace glossa::batch
