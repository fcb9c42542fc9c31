#include "engine/document.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "text/sentences.h"
#include "text/tokenizer.h"

namespace glossa {
namespace {

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }
bool IsClauseEnd(char c) { return c == ',' || c == ';' || c == ':'; }

TextSpan Trim(absl::string_view text, TextSpan span) {
  while (span.begin < span.end && IsLayoutSpace(text[span.begin])) ++span.begin;
  while (span.end > span.begin && IsLayoutSpace(text[span.end - 1])) --span.end;
  return span;
}

// Where to cut an over-long span: a whitespace byte, by preference one after a clause end
// (, ; :) in the middle half of the span, else the whitespace nearest the middle, else the
// character boundary nearest the middle. Returns span.begin when the span is one character.
size_t BestCut(absl::string_view text, TextSpan span) {
  const size_t mid = span.begin + (span.end - span.begin) / 2;
  const size_t quarter = (span.end - span.begin) / 4;
  size_t clause = 0, space = 0;
  auto nearer = [mid](size_t a, size_t b) {  // 0 = none yet
    return b == 0 || std::llabs(static_cast<long long>(a) - static_cast<long long>(mid)) <
                         std::llabs(static_cast<long long>(b) - static_cast<long long>(mid));
  };
  for (size_t p = span.begin + 1; p < span.end; ++p) {
    if (!IsLayoutSpace(text[p]) || IsLayoutSpace(text[p - 1])) continue;  // first space of a run
    if (nearer(p, space)) space = p;
    const bool central = p >= span.begin + quarter && p <= span.end - quarter;
    if (central && IsClauseEnd(text[p - 1]) && nearer(p, clause)) clause = p;
  }
  if (clause != 0) return clause;
  if (space != 0) return space;
  for (size_t d = 0; d <= mid - span.begin; ++d) {  // the character boundary nearest the middle
    for (size_t p : {mid - d, mid + d}) {
      if (p > span.begin && p < span.end && !IsContinuationByte(text[p])) return p;
    }
  }
  return span.begin;
}

// Appends `span` to `out`, cut into pieces of at most `limit` source tokens where possible.
absl::Status AppendFitting(const Model& model, absl::string_view text, TextSpan span, int limit,
                           std::vector<TextSpan>* out) {
  auto ids = model.tokenizer().EncodeSource(text.substr(span.begin, span.end - span.begin));
  if (!ids.ok()) return ids.status();
  const size_t cut = static_cast<int>(ids->size()) > limit ? BestCut(text, span) : span.begin;
  if (cut == span.begin) {  // fits, or one character: TokenizeTexts reports the latter
    out->push_back(span);
    return absl::OkStatus();
  }
  for (TextSpan part : {TextSpan{span.begin, cut}, TextSpan{cut, span.end}}) {
    part = Trim(text, part);
    if (part.begin == part.end) continue;
    if (absl::Status s = AppendFitting(model, text, part, limit, out); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Documents> SplitDocuments(const Model& model, const std::vector<std::string>& texts,
                                         absl::string_view language, int max_tokens) {
  const int limit = max_tokens > 0 ? std::min(max_tokens, model.config().max_positions)
                                   : model.config().max_positions;
  Documents out;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& text = texts[i];
    if (!IsValidUtf8(text)) {
      return absl::InvalidArgumentError(absl::StrCat("text ", i, " is not valid UTF-8"));
    }
    auto sentences = SplitSentences(text, language);
    if (!sentences.ok()) return sentences.status();
    std::vector<TextSpan> pieces;
    for (const TextSpan& sentence : *sentences) {
      if (absl::Status s = AppendFitting(model, text, sentence, limit, &pieces); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("text ", i, ": ", s.message()));
      }
    }
    Documents::Layout layout;
    layout.first = out.sentences.size();
    size_t pos = 0;
    for (const TextSpan& piece : pieces) {
      layout.gaps.push_back(text.substr(pos, piece.begin - pos));
      out.sentences.push_back(text.substr(piece.begin, piece.end - piece.begin));
      pos = piece.end;
    }
    layout.gaps.push_back(text.substr(pos));
    out.texts.push_back(std::move(layout));
  }
  return out;
}

std::vector<Translation> JoinDocuments(const Documents& documents,
                                       const std::vector<Translation>& sentences) {
  std::vector<Translation> out;
  for (const Documents::Layout& layout : documents.texts) {
    const size_t n = layout.gaps.size() - 1;
    size_t num_hypotheses = 1;
    for (size_t j = 0; j < n; ++j) {
      num_hypotheses = std::max(num_hypotheses, sentences[layout.first + j].hypotheses.size());
    }
    Translation& translation = out.emplace_back();
    for (size_t k = 0; k < num_hypotheses; ++k) {
      TranslatedHypothesis joined;
      joined.text = layout.gaps[0];
      for (size_t j = 0; j < n; ++j) {
        const auto& hypotheses = sentences[layout.first + j].hypotheses;
        if (!hypotheses.empty()) {
          const TranslatedHypothesis& h = hypotheses[std::min(k, hypotheses.size() - 1)];
          joined.text += h.text;
          joined.score += h.score;
          joined.token_ids.insert(joined.token_ids.end(), h.token_ids.begin(), h.token_ids.end());
        }
        joined.text += layout.gaps[j + 1];
      }
      translation.hypotheses.push_back(std::move(joined));
    }
  }
  return out;
}

}  // namespace glossa
