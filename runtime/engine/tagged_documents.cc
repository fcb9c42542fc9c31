#include "engine/tagged_documents.h"

#include <algorithm>
#include <optional>

#include "text/markup.h"

namespace glossa {
namespace {

using Places = std::vector<std::optional<TextSpan>>;

// One text translated whole.
void WriteWhole(const Model& model, int language_token, const TaggedText& tagged,
                Translation* translation) {
  for (TranslatedHypothesis& h : translation->hypotheses) {
    const Places placed =
        PlaceSpans(AlignWords(model.tokenizer(), tagged.text, language_token, h.text,
                              h.token_ids, h.alignment, h.attention),
                   tagged.spans);
    h.text = WriteInlineTags(h.text, tagged, placed);
    h.attention.clear();
  }
}

// A document's sentences in its text and in one joined hypothesis's text.
struct Piece {
  size_t source_begin = 0, source_end = 0;
  size_t target_begin = 0, target_end = 0;
  const TranslatedHypothesis* hypothesis = nullptr;  // null: no translation (none joined)
};

// Whether span `s` of the text has a part in piece `p` (a point: at it or inside it).
bool Touches(const TextSpan& s, const Piece& p) {
  return IsPoint(s) ? (p.source_begin <= s.begin && s.begin <= p.source_end)
                    : (s.begin < p.source_end && p.source_begin < s.end);
}

// The place of `s` (a span of the text) in the joined text, from the pieces it touches; `own`
// is each piece's PlaceEach of its part of each span.
std::optional<TextSpan> Combine(const TextSpan& s, const std::vector<Piece>& pieces,
                                const std::vector<TextSpan>& gaps_source,
                                const std::vector<TextSpan>& gaps_target,
                                const std::vector<Places>& own, size_t span) {
  // A point, or a span of whitespace only, in a gap between sentences keeps its place there.
  for (size_t g = 0; g < gaps_source.size(); ++g) {
    if (gaps_source[g].begin <= s.begin && s.end <= gaps_source[g].end) {
      const size_t at = gaps_target[g].begin +
                        std::min(s.begin - gaps_source[g].begin,
                                 gaps_target[g].end - gaps_target[g].begin);
      return TextSpan{at, at};
    }
  }
  std::optional<size_t> begin, end;
  int touched = 0;
  for (size_t j = 0; j < pieces.size(); ++j) {
    const Piece& p = pieces[j];
    if (!Touches(s, p)) continue;
    ++touched;
    const std::optional<TextSpan>& mine = own[j][span];
    if (!begin) begin = mine ? mine->begin : p.target_begin;
    end = mine ? mine->end : p.target_end;
    if (!mine && IsPoint(s)) end = begin;
  }
  if (!begin || !end || *end < *begin) return std::nullopt;
  if (touched == 1) {
    // Within one sentence: its own place, or none.
    for (size_t j = 0; j < pieces.size(); ++j) {
      const bool inside = pieces[j].source_begin <= s.begin && s.end <= pieces[j].source_end;
      if (inside) return own[j][span];
    }
  }
  return TextSpan{*begin, *end};
}

// Each sentence's PlaceEach of its part of each span that Touches it (shifted into the joined
// text; others nullopt); a part that covers the sentence whole is the sentence's whole
// translation. Only the spans that touch a sentence are placed in it: a long document with many
// tags costs each sentence its own.
Places PlaceInPiece(const Model& model, int language_token, const std::string& sentence,
                    const Piece& p, const std::vector<TextSpan>& spans) {
  Places out(spans.size());
  if (p.hypothesis == nullptr) return out;
  std::vector<TextSpan> parts;
  std::vector<size_t> which;
  for (size_t i = 0; i < spans.size(); ++i) {
    const TextSpan& s = spans[i];
    if (!Touches(s, p)) continue;
    const size_t b = std::clamp(s.begin, p.source_begin, p.source_end) - p.source_begin;
    const size_t e = std::clamp(s.end, p.source_begin, p.source_end) - p.source_begin;
    parts.push_back({b, e});
    which.push_back(i);
  }
  if (parts.empty()) return out;
  const TranslatedHypothesis& h = *p.hypothesis;
  const Places own = PlaceEach(AlignWords(model.tokenizer(), sentence, language_token, h.text,
                                          h.token_ids, h.alignment, h.attention),
                               parts);
  for (size_t k = 0; k < parts.size(); ++k) {
    std::optional<TextSpan> at = own[k];
    if (!IsPoint(parts[k]) && parts[k].begin == 0 && parts[k].end == sentence.size()) {
      at = TextSpan{0, h.text.size()};
    }
    if (at) out[which[k]] = TextSpan{at->begin + p.target_begin, at->end + p.target_begin};
  }
  return out;
}

// Hypothesis k of one document: the sentences' hypotheses k joined, with the tags written.
TranslatedHypothesis JoinTagged(const Model& model, int language_token, const TaggedText& tagged,
                                const Documents& documents, const Documents::Layout& layout,
                                const std::vector<Translation>& sentences, size_t k) {
  TranslatedHypothesis joined;
  const size_t n = layout.gaps.size() - 1;
  std::vector<Piece> pieces(n);
  std::vector<TextSpan> gaps_source, gaps_target;
  size_t source = 0;
  for (size_t j = 0; j <= n; ++j) {
    const std::string& gap = layout.gaps[j];
    gaps_source.push_back({source, source + gap.size()});
    gaps_target.push_back({joined.text.size(), joined.text.size() + gap.size()});
    source += gap.size();
    joined.text += gap;
    if (j == n) break;
    Piece& p = pieces[j];
    p.source_begin = source;
    source += documents.sentences[layout.first + j].size();
    p.source_end = source;
    p.target_begin = joined.text.size();
    const auto& hypotheses = sentences[layout.first + j].hypotheses;
    if (!hypotheses.empty()) {
      p.hypothesis = &hypotheses[std::min(k, hypotheses.size() - 1)];
      joined.text += p.hypothesis->text;
      joined.score += p.hypothesis->score;
      joined.token_ids.insert(joined.token_ids.end(), p.hypothesis->token_ids.begin(),
                              p.hypothesis->token_ids.end());
    }
    p.target_end = joined.text.size();
  }
  Places placed(tagged.spans.size());
  if (source == tagged.text.size()) {  // else a layout of some other text: every span unplaced
    std::vector<Places> own;
    for (size_t j = 0; j < n; ++j) {
      own.push_back(PlaceInPiece(model, language_token, documents.sentences[layout.first + j],
                                 pieces[j], tagged.spans));
    }
    for (size_t i = 0; i < tagged.spans.size(); ++i) {
      placed[i] = Combine(tagged.spans[i], pieces, gaps_source, gaps_target, own, i);
    }
    placed = KeepNested(tagged.spans, std::move(placed));
  }
  joined.text = WriteInlineTags(joined.text, tagged, placed);
  return joined;
}

}  // namespace

std::vector<Translation> WriteTags(const Model& model, int language_token,
                                   const std::vector<TaggedText>& tagged,
                                   const Documents* documents,
                                   std::vector<Translation> translations) {
  if (documents == nullptr) {
    for (size_t i = 0; i < translations.size() && i < tagged.size(); ++i) {
      WriteWhole(model, language_token, tagged[i], &translations[i]);
    }
    return translations;
  }
  std::vector<Translation> out;
  for (size_t i = 0; i < documents->texts.size(); ++i) {
    const Documents::Layout& layout = documents->texts[i];
    size_t num_hypotheses = 1;
    for (size_t j = 0; j + 1 < layout.gaps.size(); ++j) {
      num_hypotheses = std::max(num_hypotheses, translations[layout.first + j].hypotheses.size());
    }
    Translation& translation = out.emplace_back();
    for (size_t k = 0; k < num_hypotheses; ++k) {
      translation.hypotheses.push_back(
          i < tagged.size() ? JoinTagged(model, language_token, tagged[i], *documents, layout,
                                         translations, k)
                            : TranslatedHypothesis());
    }
  }
  return out;
}

}  // namespace glossa
