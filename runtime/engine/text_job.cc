#include "engine/text_job.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "util/status_macros.h"

namespace glossa {
namespace {

// Term `index` as a constraint: each target one alternative.
absl::StatusOr<Constraint> TermConstraint(const Model& model, const GlossaryTerm& term,
                                          size_t index) {
  Constraint constraint;
  for (size_t j = 0; j < term.targets.size(); ++j) {
    auto ids = model.tokenizer().EncodeTarget(term.targets[j]);
    if (!ids.ok() || ids->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("glossary entry ", index, ", target ", j, ": ",
                       ids.ok() ? "the term is empty" : ids.status().message()));
    }
    constraint.alternatives.push_back(*std::move(ids));
  }
  if (constraint.alternatives.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("glossary entry ", index, " has no target term"));
  }
  if (absl::Status ok = CheckConstraints({constraint}, model.config().target_vocab_size);
      !ok.ok()) {
    // "constraint 0: alternative 0 starts alternative 1 (...)" in the glossary's words.
    return absl::InvalidArgumentError(absl::StrCat(
        "glossary entry ", index, ": as tokens, ",
        absl::StrReplaceAll(ok.message(),
                            {{"constraint 0: alternative", "target"}, {"alternative", "target"}})));
  }
  return constraint;
}

// Terms and the matcher built from them.
struct GlossaryPart {
  const std::vector<GlossaryTerm>* terms;
  const GlossaryMatcher* matcher;
};

struct FoundTerm {
  size_t index;  // numbered across the parts
  const GlossaryTerm* term;
};

// The terms of `parts` that occur in `text`, in ascending order of index.
std::vector<FoundTerm> FindTerms(const std::vector<GlossaryPart>& parts, absl::string_view text) {
  std::vector<FoundTerm> found;
  size_t first = 0;
  for (const GlossaryPart& part : parts) {
    for (int i : part.matcher->Match(text)) {
      found.push_back({first + static_cast<size_t>(i), &(*part.terms)[i]});
    }
    first += part.terms->size();
  }
  return found;
}

// GlossaryConstraints of the terms of `parts`, in order.
absl::StatusOr<std::vector<std::vector<Constraint>>> PartsConstraints(
    const Model& model, const std::vector<std::string>& texts, const TextSources& sources,
    const std::vector<GlossaryPart>& parts, int max_per_text) {
  std::vector<std::vector<Constraint>> out;
  std::map<size_t, Constraint> encoded;  // the terms that occur, encoded once
  bool any = false;
  out.resize(sources.sources.size());
  for (size_t k = 0; k < sources.sources.size(); ++k) {
    const size_t text = sources.text_index[k];
    const std::vector<FoundTerm> found = FindTerms(parts, texts[text]);
    if (static_cast<int>(found.size()) > max_per_text) {
      return absl::InvalidArgumentError(absl::StrCat(
          "text ", text, " holds ", found.size(), " glossary terms; at most ", max_per_text,
          " apply to one text (sentence, with split_sentences)"));
    }
    for (const FoundTerm& term : found) {
      auto it = encoded.find(term.index);
      if (it == encoded.end()) {
        GLOSSA_ASSIGN_OR_RETURN(Constraint constraint,
                                TermConstraint(model, *term.term, term.index));
        it = encoded.emplace(term.index, std::move(constraint)).first;
      }
      out[k].push_back(it->second);
      any = true;
    }
  }
  if (!any) out.clear();
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::vector<Constraint>>> GlossaryConstraints(
    const Model& model, const std::vector<std::string>& texts, const TextSources& sources,
    const std::vector<GlossaryTerm>& terms, int max_per_text) {
  if (terms.empty()) return std::vector<std::vector<Constraint>>();
  GLOSSA_ASSIGN_OR_RETURN(const GlossaryMatcher matcher, GlossaryMatcher::Create(terms));
  return PartsConstraints(model, texts, sources, {{&terms, &matcher}}, max_per_text);
}

absl::StatusOr<std::vector<std::vector<Constraint>>> GlossaryConstraints(
    const Model& model, const std::vector<std::string>& texts, const TextSources& sources,
    const std::vector<const CompiledGlossary*>& glossaries, int max_per_text) {
  std::vector<GlossaryPart> parts;
  for (const CompiledGlossary* glossary : glossaries) {
    parts.push_back({&glossary->terms, &glossary->matcher});
  }
  return PartsConstraints(model, texts, sources, parts, max_per_text);
}

absl::StatusOr<TextSources> TokenizeTexts(const Model& model, const std::vector<std::string>& texts,
                                          int max_tokens, int language_token) {
  const int limit = max_tokens > 0 ? std::min(max_tokens, model.config().max_positions)
                                   : model.config().max_positions;
  TextSources out;
  out.num_texts = texts.size();
  for (size_t i = 0; i < texts.size(); ++i) {
    if (texts[i].empty()) continue;
    auto ids = model.tokenizer().EncodeSource(texts[i], language_token);
    if (!ids.ok()) {
      return absl::Status(ids.status().code(),
                          absl::StrCat("text ", i, ": ", ids.status().message()));
    }
    if (static_cast<int>(ids->size()) > limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "text ", i, " has ", ids->size(), " tokens (end of sentence included); the limit is ",
          limit, ": split long texts into sentences"));
    }
    out.sources.push_back(*std::move(ids));
    out.text_index.push_back(i);
  }
  return out;
}

std::vector<Translation> DetokenizeResults(const Model& model, const TextSources& sources,
                                           std::vector<std::vector<Hypothesis>> results) {
  std::vector<Translation> out(sources.num_texts);
  std::vector<bool> filled(sources.num_texts, false);
  for (size_t k = 0; k < results.size() && k < sources.text_index.size(); ++k) {
    const size_t i = sources.text_index[k];
    filled[i] = true;
    for (Hypothesis& h : results[k]) {
      TranslatedHypothesis t;
      t.text = model.tokenizer().DecodeTarget(h.tokens);
      t.score = h.score;
      t.token_ids = std::move(h.tokens);
      t.token_scores = std::move(h.token_scores);
      t.alignment = std::move(h.alignment);
      t.attention = std::move(h.attention);
      out[i].hypotheses.push_back(std::move(t));
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (!filled[i]) out[i].hypotheses.push_back({});
  }
  return out;
}

}  // namespace glossa
