#include "text/markup.h"

#include <algorithm>
#include <tuple>

namespace glossa {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// ASCII punctuation: a tag's edge stays off it where it is not part of the aligned tokens.
bool IsPunctuation(char c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
         (c >= '{' && c <= '~');
}

// Punctuation of other scripts that translations often carry: quotation marks (U+2018-U+201F),
// guillemets, inverted question and exclamation marks.
constexpr absl::string_view kPunctuation[] = {
    "\xE2\x80\x98", "\xE2\x80\x99", "\xE2\x80\x9A", "\xE2\x80\x9B", "\xE2\x80\x9C",
    "\xE2\x80\x9D", "\xE2\x80\x9E", "\xE2\x80\x9F", "\xC2\xAB",     "\xC2\xBB",
    "\xC2\xBF",     "\xC2\xA1"};

// The bytes of the punctuation mark that starts at text[i] (0: none).
size_t PunctuationAt(absl::string_view text, size_t i) {
  if (i >= text.size()) return 0;
  if (IsPunctuation(text[i])) return 1;
  for (absl::string_view p : kPunctuation) {
    if (text.substr(i, p.size()) == p) return p.size();
  }
  return 0;
}

// The bytes of the punctuation mark that ends at text[i - 1] (0: none).
size_t PunctuationBefore(absl::string_view text, size_t i) {
  if (i == 0 || i > text.size()) return 0;
  if (IsPunctuation(text[i - 1])) return 1;
  for (absl::string_view p : kPunctuation) {
    if (i >= p.size() && text.substr(i - p.size(), p.size()) == p) return p.size();
  }
  return 0;
}

std::vector<TextSpan> Words(absl::string_view text) {
  std::vector<TextSpan> words;
  for (size_t i = 0; i < text.size();) {
    if (IsSpace(text[i])) {
      ++i;
      continue;
    }
    TextSpan w{i, i};
    while (i < text.size() && !IsSpace(text[i])) ++i;
    w.end = i;
    words.push_back(w);
  }
  return words;
}

// What PlaceSpans works from, checked once.
class Placer {
 public:
  explicit Placer(const AlignedTranslation& t) : t_(t) {
    source_words_ = Words(t.source);
    target_words_ = Words(t.target);
    usable_ = !t.source_words.empty() && !t.target_tokens.empty() &&
              t.alignment.size() == t.target_tokens.size() && !target_words_.empty();
    for (int w : t.source_words) usable_ = usable_ && w < static_cast<int>(source_words_.size());
  }

  bool usable() const { return usable_; }

  // The source words span s touches: [first, last], or first > last for none.
  std::pair<int, int> SourceWords(const TextSpan& s) const {
    int first = static_cast<int>(source_words_.size()), last = -1;
    for (int w = 0; w < static_cast<int>(source_words_.size()); ++w) {
      if (source_words_[w].begin < s.end && s.begin < source_words_[w].end) {
        first = std::min(first, w);
        last = std::max(last, w);
      }
    }
    return {first, last};
  }

  // The source word of the source token that target token k aligns to, or -1.
  int AlignedWord(size_t k) const {
    const int s = t_.alignment[k];
    if (s < 0 || s >= static_cast<int>(t_.source_words.size())) return -1;
    return t_.source_words[s];
  }

  // The target tokens aligned to a source word in [first, last]. With none and the attention
  // at hand, the other direction: for each source token of those words, the target token that
  // attends to it most.
  std::vector<bool> TokensOf(int first, int last) const {
    std::vector<bool> in(t_.target_tokens.size(), false);
    bool any = false;
    for (size_t k = 0; k < in.size(); ++k) {
      const int w = AlignedWord(k);
      in[k] = w >= first && w <= last && t_.target_tokens[k].first < t_.target_tokens[k].second;
      any = any || in[k];
    }
    const size_t sources = t_.source_words.size();
    if (t_.attention.size() != in.size() * sources) return in;
    for (size_t s = 0; s < sources; ++s) {
      if (t_.source_words[s] < first || t_.source_words[s] > last) continue;
      size_t best = in.size();
      for (size_t k = 0; k < in.size(); ++k) {
        if (t_.target_tokens[k].first >= t_.target_tokens[k].second) continue;
        if (best == in.size() || t_.attention[k * sources + s] > t_.attention[best * sources + s]) {
          best = k;
        }
      }
      if (best < in.size()) in[best] = true;
    }
    return in;
  }

  // The attention target token k pays to the source tokens of words [first, last] (1 without
  // the attention).
  float Mass(size_t k, int first, int last) const {
    const size_t sources = t_.source_words.size();
    if (t_.attention.size() != t_.target_tokens.size() * sources) return 1.0f;
    float mass = 0.0f;
    for (size_t s = 0; s < sources; ++s) {
      if (t_.source_words[s] >= first && t_.source_words[s] <= last) {
        mass += t_.attention[k * sources + s];
      }
    }
    return mass;
  }

  // Of the runs of consecutive tokens in `in`, the one of most Mass: [first, last] token
  // indexes (first > last: none). An element marks one phrase; its translation is one too.
  std::pair<size_t, size_t> BestRun(const std::vector<bool>& in, int first, int last) const {
    std::pair<size_t, size_t> best{1, 0};
    float best_mass = -1.0f;
    for (size_t k = 0; k < in.size();) {
      if (!in[k]) {
        ++k;
        continue;
      }
      const size_t start = k;
      size_t end = k;
      float mass = 0.0f;
      // A run goes on over a gap of one token (an adjective between article and noun).
      for (; k < in.size() && (in[k] || (k + 1 < in.size() && in[k + 1])); ++k) {
        if (in[k]) {
          mass += Mass(k, first, last);
          end = k;
        }
      }
      if (mass > best_mass) {
        best_mass = mass;
        best = {start, end};
      }
    }
    return best;
  }

  // The target bytes of TokensOf(first, last), widened to their words but for punctuation at
  // the edges; nullopt when there are none.
  std::optional<TextSpan> TargetOf(int first, int last) const {
    const auto [first_token, last_token] = BestRun(TokensOf(first, last), first, last);
    if (first_token > last_token) return std::nullopt;
    size_t begin = t_.target_tokens[first_token].first, end = t_.target_tokens[last_token].second;
    if (begin >= end) return std::nullopt;
    while (begin < end && IsSpace(t_.target[begin])) ++begin;
    while (end > begin && IsSpace(t_.target[end - 1])) --end;
    auto word_char = [&](size_t i) {
      return !IsSpace(t_.target[i]) && !IsPunctuation(t_.target[i]);
    };
    while (begin > 0 && word_char(begin - 1)) --begin;
    while (end < t_.target.size() && word_char(end)) ++end;
    if (begin >= end) return std::nullopt;
    return TextSpan{begin, end};
  }

  // A point before source word `word` (its count: at the end): before the first target word
  // aligned to it, else at the same relative place among the target's words.
  size_t TargetPoint(int word) const {
    const int n = static_cast<int>(source_words_.size());
    if (word >= n) return t_.target.size();
    if (auto at = TargetOf(word, word)) return at->begin;
    const size_t k = static_cast<size_t>(word) * target_words_.size() / std::max(1, n);
    return k < target_words_.size() ? target_words_[k].begin : t_.target.size();
  }

  int SourceWordAtOrAfter(size_t byte) const {
    int w = 0;
    while (w < static_cast<int>(source_words_.size()) && source_words_[w].end <= byte) ++w;
    return w;
  }

 private:
  const AlignedTranslation& t_;
  std::vector<TextSpan> source_words_, target_words_;
  bool usable_ = false;
};

bool Contains(const TextSpan& outer, const TextSpan& inner) {
  return outer.begin <= inner.begin && inner.end <= outer.end;
}

bool Cross(const TextSpan& a, const TextSpan& b) {
  return a.begin < b.begin ? (b.begin < a.end && a.end < b.end)
                           : (a.begin < b.end && b.end < a.end && b.begin < a.begin);
}

// Punctuation at an edge of the target place is left outside it unless the marked source text
// has punctuation at that edge too ("<b>mundo</b>." -> "<b>world</b>.").
std::optional<TextSpan> TrimPunctuation(absl::string_view source, const TextSpan& marked,
                                        absl::string_view target, TextSpan at) {
  size_t b = marked.begin, e = std::min(marked.end, source.size());
  while (b < e && IsSpace(source[b])) ++b;
  while (e > b && IsSpace(source[e - 1])) --e;
  if (b >= e) return at;
  if (PunctuationAt(source, b) == 0) {
    while (at.begin < at.end) {
      const size_t n = PunctuationAt(target, at.begin);
      if (n == 0) break;
      at.begin += n;
    }
  }
  if (PunctuationBefore(source, e) == 0) {
    while (at.end > at.begin) {
      const size_t n = PunctuationBefore(target, at.end);
      if (n == 0) break;
      at.end -= n;
    }
  }
  if (at.begin >= at.end) return std::nullopt;
  return at;
}

}  // namespace

AlignedTranslation AlignWords(const Tokenizer& tokenizer, absl::string_view source,
                              int language_id, absl::string_view target,
                              const std::vector<int>& target_ids,
                              const std::vector<int>& alignment,
                              const std::vector<float>& attention) {
  AlignedTranslation t;
  t.source = source;
  t.target = target;
  t.source_words = tokenizer.SourceWords(source, language_id);
  t.target_tokens = tokenizer.TargetOffsets(target_ids);
  t.alignment = alignment;
  t.attention = attention;
  return t;
}

std::vector<std::optional<TextSpan>> PlaceEach(const AlignedTranslation& translation,
                                               const std::vector<TextSpan>& spans) {
  std::vector<std::optional<TextSpan>> places(spans.size());
  const Placer placer(translation);
  if (!placer.usable()) return places;
  for (size_t i = 0; i < spans.size(); ++i) {
    const TextSpan& s = spans[i];
    if (IsPoint(s)) {
      const size_t p = placer.TargetPoint(placer.SourceWordAtOrAfter(s.begin));
      places[i] = TextSpan{p, p};
      continue;
    }
    const auto [first, last] = placer.SourceWords(s);
    if (first <= last) places[i] = placer.TargetOf(first, last);
    if (places[i]) places[i] = TrimPunctuation(translation.source, s, translation.target, *places[i]);
  }
  return places;
}

std::vector<std::optional<TextSpan>> KeepNested(const std::vector<TextSpan>& spans,
                                                std::vector<std::optional<TextSpan>> places) {
  std::vector<std::optional<TextSpan>> placed(spans.size());
  for (size_t i = 0; i < spans.size() && i < places.size(); ++i) {
    const TextSpan& s = spans[i];
    // The nearest earlier span that contains this one in the source: its container.
    int parent = -1;
    for (int j = static_cast<int>(i) - 1; j >= 0 && parent < 0; --j) {
      if (!IsPoint(spans[j]) && Contains(spans[j], s)) parent = j;
    }
    const std::optional<TextSpan> within = parent >= 0 ? placed[parent] : std::nullopt;
    std::optional<TextSpan> at = places[i];
    if (at && IsPoint(s)) {
      if (within) at->begin = at->end = std::clamp(at->begin, within->begin, within->end);
    } else if (at) {
      if (within) {
        at->begin = std::max(at->begin, within->begin);
        at->end = std::min(at->end, within->end);
        if (at->begin >= at->end) at.reset();
      }
      for (size_t j = 0; at && j < i; ++j) {
        if (placed[j] && !IsPoint(*placed[j]) && Cross(*at, *placed[j])) at.reset();
      }
    }
    placed[i] = at;
  }
  return placed;
}

std::vector<std::optional<TextSpan>> PlaceSpans(const AlignedTranslation& translation,
                                                const std::vector<TextSpan>& spans) {
  return KeepNested(spans, PlaceEach(translation, spans));
}

std::vector<MarkupEvent> MarkupEvents(const std::vector<std::optional<TextSpan>>& placed,
                                      size_t length) {
  // Sort key: offset, then rank (unplaced starts, ends, points, starts, unplaced ends), then
  // the order within the rank.
  struct Keyed {
    size_t at;
    int rank;
    long long order;
    MarkupEvent event;
  };
  std::vector<Keyed> keyed;
  for (size_t i = 0; i < placed.size(); ++i) {
    const int span = static_cast<int>(i);
    const long long index = static_cast<long long>(i);
    if (!placed[i]) {
      keyed.push_back({0, 0, index, {0, span, true}});
      keyed.push_back({length, 4, -index, {length, span, false}});
      continue;
    }
    const TextSpan& s = *placed[i];
    if (IsPoint(s)) {
      keyed.push_back({s.begin, 2, 2 * index, {s.begin, span, true}});
      keyed.push_back({s.begin, 2, 2 * index + 1, {s.begin, span, false}});
      continue;
    }
    // Starts: the longer first, then the earlier; ends: the later-starting first, then the later.
    const long long n = static_cast<long long>(placed.size());
    keyed.push_back({s.begin, 3, -static_cast<long long>(s.end) * n + index, {s.begin, span, true}});
    keyed.push_back({s.end, 1, -static_cast<long long>(s.begin) * n - index, {s.end, span, false}});
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
    return std::tie(a.at, a.rank, a.order) < std::tie(b.at, b.rank, b.order);
  });
  std::vector<MarkupEvent> out;
  for (const Keyed& k : keyed) out.push_back(k.event);
  return out;
}

}  // namespace glossa
