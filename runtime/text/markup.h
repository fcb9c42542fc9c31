// Inline markup carried across a translation: the source sentence is translated without its
// markup, and each marked span of it is put on the target words that translate the marked
// words, found through the alignment the decoder gives (Hypothesis::alignment: for each target
// token, the source token its cross-attention weighs most).
//
// Words are the runs of characters between whitespace. A span marks the source words it
// touches. The target tokens that translate them are those aligned to one of those words and,
// with the attention at hand, for each of their source tokens the target token that attends to
// it most (the other direction of the same attention: the first target token often aligns to a
// neighbour of its word). Of those, the run of consecutive tokens (a gap of one token allowed)
// that pays the marked words the most attention is the span's place, widened to whole words but
// not over punctuation the marked text does not have at that edge. A point (an empty element such as <br>) goes before the target word aligned to
// the source word after it, or, with none, at the same relative place in the target's words.
// The result nests as the source did: a span is placed only inside the place of the span that
// contains it and without crossing a span placed before it (spans are placed outermost first,
// in source order); a span that cannot be placed so is reported unplaced, and the caller puts it
// around the whole sentence, so that nothing is lost, nothing duplicated, and the markup stays
// well-formed.
#ifndef GLOSSA_RUNTIME_TEXT_MARKUP_H_
#define GLOSSA_RUNTIME_TEXT_MARKUP_H_

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "text/sentences.h"
#include "text/tokenizer.h"

namespace glossa {

// Spans are text/sentences.h's TextSpan: bytes [begin, end) of a text; begin == end: a point
// between two characters (an empty element).
inline bool IsPoint(const TextSpan& s) { return s.begin == s.end; }

struct AlignedTranslation {
  absl::string_view source;  // the sentence as translated, without markup
  // For each source token (as the model saw them), its word in `source` (-1: none, e.g. </s>).
  std::vector<int> source_words;
  absl::string_view target;
  // For each target token, its bytes in `target` ([x, x): none, e.g. a language token).
  std::vector<std::pair<size_t, size_t>> target_tokens;
  std::vector<int> alignment;  // for each target token, a source token index
  // Optional: the attention the alignment was taken from, [target tokens, source tokens].
  std::vector<float> attention;
};

// The AlignedTranslation of `source`, encoded with `language_id` as the engine encoded it, into
// `target` (the text of target_ids) with the alignment the engine gave for target_ids.
AlignedTranslation AlignWords(const Tokenizer& tokenizer, absl::string_view source,
                              int language_id, absl::string_view target,
                              const std::vector<int>& target_ids,
                              const std::vector<int>& alignment,
                              const std::vector<float>& attention = {});

// The place of each span of `source` in `target` (std::nullopt: unplaced). Spans are given in
// the source's order of their start tags (a container before what it contains) and must nest.
// Without a usable alignment (empty word lists, sizes that disagree) every span is unplaced.
std::vector<std::optional<TextSpan>> PlaceSpans(const AlignedTranslation& translation,
                                                const std::vector<TextSpan>& spans);

// PlaceSpans in two steps: each span's place on its own (points always placed where the
// alignment is usable), then the rule that keeps them nested (a span inside its container's
// place, none crossing one placed before it). A caller that places the parts of a document
// apart (text per sentence) runs KeepNested on the places it put together.
std::vector<std::optional<TextSpan>> PlaceEach(const AlignedTranslation& translation,
                                               const std::vector<TextSpan>& spans);
std::vector<std::optional<TextSpan>> KeepNested(const std::vector<TextSpan>& spans,
                                                std::vector<std::optional<TextSpan>> places);

// Where the caller writes each span's start and end in a text of `length` bytes: events in
// writing order (at equal offsets, ends before starts; the outer span's start first and its end
// last). Unplaced spans start before everything and end after everything, outermost first.
struct MarkupEvent {
  size_t at = 0;
  int span = 0;
  bool start = true;
};
std::vector<MarkupEvent> MarkupEvents(const std::vector<std::optional<TextSpan>>& placed,
                                      size_t length);

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_TEXT_MARKUP_H_
