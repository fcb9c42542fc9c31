// A document's inline markup sent through translation as placeholder tags. A paragraph with
// markup inside its sentences ("Hola <b>mundo</b> cruel.", a Word paragraph's bold run) is sent
// as ONE text with TranslateRequest.inline_tags: its text escaped (& < >), each element as
// <gN>...</gN> and each empty element (an image, a comment, a code span) as <xN/>, N its index
// here. The server places the tags on the translation (text/markup.h in the runtime); the
// document then writes each placeholder back as the markup it stands for. Placeholders keep
// the text the model sees free of the markup's attributes and its length bounded.
#ifndef GLOSSA_SERVER_TEXT_PLACEHOLDERS_H_
#define GLOSSA_SERVER_TEXT_PLACEHOLDERS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace glossa::server {

// What placeholder N stands for: an element's start and end tags, or an empty element's bytes
// (start; end empty).
struct Markup {
  std::string start, end;
  bool point = false;
};

// Builds a text with placeholders.
class PlaceholderText {
 public:
  void Text(absl::string_view plain);
  // Opens an element; returns its placeholder's index, for Close.
  int Open(std::string start, std::string end);
  void Close(int id);
  void Point(std::string bytes);

  const std::string& text() const { return text_; }    // with placeholders, escaped
  const std::string& plain() const { return plain_; }  // without them, not escaped
  const std::vector<Markup>& markup() const { return markup_; }
  size_t elements() const { return markup_.size(); }

 private:
  std::string text_, plain_;
  std::vector<Markup> markup_;
};

// A translation with placeholders, in order.
struct PlaceholderEvent {
  enum Kind { kText, kOpen, kClose, kPoint } kind;
  int id = -1;       // kOpen, kClose, kPoint
  std::string text;  // kText: the text, entities decoded
};

// Reads a translation's placeholders for `markup`: a tag that is not one of them (or one seen
// before) is text. Every element of `markup` the translation lacks is added at its end (a pair
// empty), so none is lost; opens and closes come out balanced.
std::vector<PlaceholderEvent> ReadPlaceholders(absl::string_view translation,
                                               const std::vector<Markup>& markup);

// The translation with each placeholder replaced by the markup's bytes, its text escaped.
std::string WriteMarkup(absl::string_view translation, const std::vector<Markup>& markup);

// Whether a text with placeholders holds a tag or an escaped character: only then does it need
// TranslateRequest.inline_tags (without, it is the same text either way).
inline bool HasMarkup(absl::string_view text) {
  return text.find_first_of("<&") != absl::string_view::npos;
}

// The text of a text with placeholders, without them, entities decoded.
std::string PlainText(absl::string_view text);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_TEXT_PLACEHOLDERS_H_
