// PlaceSpans and MarkupEvents on hand-made alignments.
#include "text/markup.h"

#include <string>
#include <tuple>

#include "gtest/gtest.h"

namespace glossa {
namespace {

// A translation whose tokens are its words, then </s> on both sides.
struct Toy {
  std::string source, target;
  std::vector<int> alignment;  // per target token: a source token (= its word; the last: </s>)
  AlignedTranslation Get() const {
    AlignedTranslation t;
    t.source = source;
    t.target = target;
    int words = 0;
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] != ' ' && (i == 0 || source[i - 1] == ' ')) t.source_words.push_back(words++);
    }
    t.source_words.push_back(-1);  // </s>
    size_t begin = 0;
    for (size_t i = 0; i <= target.size(); ++i) {
      if (i == target.size() || target[i] == ' ') {
        t.target_tokens.emplace_back(begin, i);
        begin = i + 1;
      }
    }
    t.target_tokens.emplace_back(target.size(), target.size());  // </s>
    t.alignment = alignment;
    return t;
  }
};

// The target with each span written as [k ... ]k (points as |k|).
std::string Write(const std::string& target, const std::vector<std::optional<TextSpan>>& placed) {
  std::string out;
  size_t pos = 0;
  for (const MarkupEvent& e : MarkupEvents(placed, target.size())) {
    out += target.substr(pos, e.at - pos);
    pos = e.at;
    const bool point = placed[e.span] && IsPoint(*placed[e.span]);
    if (point) {
      if (e.start) out += "|" + std::to_string(e.span) + "|";
    } else {
      out += e.start ? "[" + std::to_string(e.span) + " " : " ]" + std::to_string(e.span);
    }
  }
  return out + target.substr(pos);
}

TEST(MarkupTest, ASpanFollowsItsWordsAcrossAReordering) {
  // "la casa roja" -> "the red house": "casa" (source word 1) is "house" (target word 2).
  const Toy toy{"la casa roja", "the red house", {0, 2, 1, 3}};
  const auto placed = PlaceSpans(toy.Get(), {{3, 7}});  // "casa"
  ASSERT_TRUE(placed[0].has_value());
  EXPECT_EQ(Write(toy.target, placed), "the red [0 house ]0");
}

TEST(MarkupTest, APartOfAWordMarksTheWholeWordAndNotItsPunctuation) {
  const Toy toy{"hola mundo.", "hello world.", {0, 1, 2}};
  const auto placed = PlaceSpans(toy.Get(), {{6, 8}});  // "un" of "mundo."
  EXPECT_EQ(Write(toy.target, placed), "hello [0 world ]0.");
}

TEST(MarkupTest, NestedSpansStayNested) {
  // <b>la <i>casa</i></b> roja -> the red house: b covers "the ... house", i "house".
  const Toy toy{"la casa roja", "the red house", {0, 2, 1, 3}};
  const auto placed = PlaceSpans(toy.Get(), {{0, 7}, {3, 7}});
  EXPECT_EQ(Write(toy.target, placed), "[0 the red [1 house ]1 ]0");
}

TEST(MarkupTest, ASpanThatWouldCrossAnotherWrapsTheSentence) {
  // Source words 0..3; span 0 marks words 0-1, span 1 words 2-3; the alignment interleaves them.
  const Toy toy{"a b c d", "A C B D", {0, 2, 1, 3, 4}};
  const auto placed = PlaceSpans(toy.Get(), {{0, 3}, {4, 7}});
  ASSERT_TRUE(placed[0].has_value());
  EXPECT_FALSE(placed[1].has_value());
  EXPECT_EQ(Write(toy.target, placed), "[1 [0 A C B ]0 D ]1");
}

TEST(MarkupTest, AnUnalignedSpanWrapsTheSentence) {
  const Toy toy{"a b c", "A C", {0, 2, 3}};
  const auto placed = PlaceSpans(toy.Get(), {{2, 3}});  // "b": nothing aligns to it
  EXPECT_FALSE(placed[0].has_value());
  EXPECT_EQ(Write(toy.target, placed), "[0 A C ]0");
}

TEST(MarkupTest, APointGoesBeforeTheTranslationOfTheWordAfterIt) {
  // "la<br> casa roja": the point is before "casa" (source word 1) -> before "house".
  const Toy toy{"la casa roja", "the red house", {0, 2, 1, 3}};
  const auto placed = PlaceSpans(toy.Get(), {{2, 2}});
  EXPECT_EQ(Write(toy.target, placed), "the red |0|house");
  // At the end of the source: at the end of the target.
  EXPECT_EQ(Write(toy.target, PlaceSpans(toy.Get(), {{12, 12}})), "the red house|0|");
}

TEST(MarkupTest, WithoutAnAlignmentEverySpanWrapsTheSentence) {
  Toy toy{"la casa", "the house", {}};
  const auto placed = PlaceSpans(toy.Get(), {{0, 2}, {3, 7}});
  EXPECT_FALSE(placed[0].has_value());
  EXPECT_FALSE(placed[1].has_value());
  EXPECT_EQ(Write(toy.target, placed), "[0 [1 the house ]1 ]0");
}

TEST(MarkupTest, AChildIsKeptInsideItsPlacedParent) {
  // <b>a <i>b</i></b> c: the parent goes to "A"; the child's word aligns outside it.
  const Toy toy{"a b c", "A X C", {0, 2, 2, 3}};
  const auto placed = PlaceSpans(toy.Get(), {{0, 3}, {2, 3}});
  ASSERT_TRUE(placed[0].has_value());
  EXPECT_FALSE(placed[1].has_value());
}

// Attention rows for a translation: row k puts `weight` on source token alignment[k] and spreads the
// rest evenly; `extra` adds (target token, source token, weight) cells.
std::vector<float> Attention(const AlignedTranslation& t,
                             std::vector<std::tuple<int, int, float>> extra = {}) {
  const size_t sources = t.source_words.size();
  std::vector<float> a(t.alignment.size() * sources, 0.01f);
  for (size_t k = 0; k < t.alignment.size(); ++k) a[k * sources + t.alignment[k]] = 0.5f;
  for (const auto& [k, s, w] : extra) a[k * sources + s] = w;
  return a;
}

TEST(MarkupTest, AWordNoTokenAlignsToTakesTheTokenThatAttendsToItMost) {
  // "dijo Dios" -> "God said": "God" aligns to "dijo" (as the first token often does), but it
  // attends to "Dios" more than any other target token does.
  const Toy toy{"dijo Dios", "God said", {0, 0, 2}};
  AlignedTranslation t = toy.Get();
  t.attention = Attention(t, {{0, 1, 0.4f}});
  const auto placed = PlaceSpans(t, {{5, 9}});  // "Dios"
  EXPECT_EQ(Write(toy.target, placed), "[0 God ]0 said");
}

TEST(MarkupTest, OfTokensFarApartTheRunThatAttendsMostIsMarked) {
  // Source word 0 is aligned from target tokens 0 and 3, apart: the element goes on one of them,
  // the one paying the marked word more attention.
  const Toy toy{"a b c", "A B C D", {0, 1, 2, 0, 3}};
  AlignedTranslation t = toy.Get();
  t.attention = Attention(t, {{3, 0, 0.9f}});
  EXPECT_EQ(Write(toy.target, PlaceSpans(t, {{0, 1}})), "A B C [0 D ]0");
  // Without the attention, the first run (equal weights: the earlier wins).
  EXPECT_EQ(Write(toy.target, PlaceSpans(toy.Get(), {{0, 1}})), "[0 A ]0 B C D");
}

TEST(MarkupTest, ARunGoesOnOverAOneTokenGap) {
  // "la casa roja" -> "the red house" with <b>la casa</b>: "the" and "house" align to it, "red"
  // between them does not; the element covers the three.
  const Toy toy{"la casa roja", "the red house", {0, 2, 1, 3}};
  EXPECT_EQ(Write(toy.target, PlaceSpans(toy.Get(), {{0, 7}})), "[0 the red house ]0");
}

TEST(MarkupTest, EventsAreWellFormedForEqualPlaces) {
  // Two spans on the same words: the container's start first and its end last.
  const Toy toy{"a b", "A B", {0, 1, 2}};
  const auto placed = PlaceSpans(toy.Get(), {{0, 1}, {0, 1}});
  EXPECT_EQ(Write(toy.target, placed), "[0 [1 A ]1 ]0 B");
}

}  // namespace
}  // namespace glossa
