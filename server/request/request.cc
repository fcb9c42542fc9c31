#include "server/request/request.h"

#include <climits>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glossa/internal/raw_request.pb.h"
#include "text/languages.h"
#include "text/tokenizer.h"
#include "util/status_macros.h"

namespace glossa::server {
namespace {

absl::StatusOr<TranslateOptions> ToOptions(const v1::DecodingOptions& o) {
  // NaN fails every comparison, so the range checks further on let it through (found by fuzzing:
  // a NaN temperature meant "no sampling", a NaN top_p "no cut").
  for (float v : {o.length_penalty(), o.sampling_temperature(), o.sampling_top_p(),
                  o.repetition_penalty()}) {
    if (std::isnan(v)) {
      return absl::InvalidArgumentError(
          "length_penalty, sampling_temperature, sampling_top_p and repetition_penalty must be "
          "numbers, not NaN");
    }
  }
  constexpr uint32_t kHuge = 1u << 20;
  if (o.beam_size() > kHuge || o.num_hypotheses() > kHuge || o.max_output_tokens() > kHuge ||
      o.min_output_tokens() > kHuge || o.no_repeat_ngram_size() > kHuge) {
    return absl::InvalidArgumentError(
        "beam_size, num_hypotheses, max_output_tokens, min_output_tokens and "
        "no_repeat_ngram_size must be small positive numbers");
  }
  TranslateOptions t;
  t.beam_size = static_cast<int>(o.beam_size());
  t.num_hypotheses = static_cast<int>(o.num_hypotheses());
  t.max_output_tokens = static_cast<int>(o.max_output_tokens());
  if (o.length_penalty() != 0.0f) t.length_penalty = o.length_penalty();
  if (o.sampling_top_k() > kHuge) {
    return absl::InvalidArgumentError("sampling_top_k must be a small number (0: no cut)");
  }
  t.sampling.temperature = o.sampling_temperature();
  t.sampling.top_k = static_cast<int>(o.sampling_top_k());
  t.sampling.top_p = o.sampling_top_p();
  t.sampling.seed = o.seed();
  t.repetition_penalty = o.repetition_penalty();
  t.no_repeat_ngram_size = static_cast<int>(o.no_repeat_ngram_size());
  t.min_output_tokens = static_cast<int>(o.min_output_tokens());
  t.target_prefix = o.target_prefix();
  t.token_scores = o.return_token_scores();
  t.alignment = o.return_alignment();
  t.scores = o.return_scores();
  return t;
}

// Language codes are short printable ASCII or UTF-8; anything else is refused before it reaches a
// message (the codes are quoted in the errors that list a model's languages).
absl::Status CheckLanguageField(const char* field, const std::string& value) {
  constexpr size_t kMaxLanguageBytes = 64;
  if (value.size() > kMaxLanguageBytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is ", value.size(),
                                                   " bytes long; language codes are at most ",
                                                   kMaxLanguageBytes));
  }
  if (!IsValidUtf8(value)) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is not valid UTF-8"));
  }
  for (unsigned char c : value) {
    if (c < 0x20 || c == 0x7F) {
      return absl::InvalidArgumentError(absl::StrCat(field, " holds a control character"));
    }
  }
  return absl::OkStatus();
}

// The request's own glossary entries as terms, checked against the limits.
absl::StatusOr<std::vector<GlossaryTerm>> RequestTerms(const v1::TranslateRequest& request,
                                                       const RequestLimits& limits) {
  std::vector<GlossaryTerm> terms;
  if (request.glossary_size() > limits.max_glossary_entries) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the glossary holds ", request.glossary_size(), " entries; the limit is ",
        limits.max_glossary_entries, " per request"));
  }
  for (int i = 0; i < request.glossary_size(); ++i) {
    const v1::GlossaryEntry& entry = request.glossary(i);
    GlossaryTerm term{entry.source(), {entry.targets().begin(), entry.targets().end()}};
    if (term.source.size() > static_cast<size_t>(limits.max_glossary_term_bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "glossary entry ", i, ": the source term is ", term.source.size(),
          " bytes; the limit is ", limits.max_glossary_term_bytes));
    }
    for (size_t j = 0; j < term.targets.size(); ++j) {
      if (term.targets[j].size() > static_cast<size_t>(limits.max_glossary_term_bytes)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "glossary entry ", i, ", target ", j, ": ", term.targets[j].size(),
            " bytes; the limit is ", limits.max_glossary_term_bytes));
      }
    }
    terms.push_back(std::move(term));
  }
  return terms;
}

// The stored glossary that glossary_id names (null when the request names none).
absl::StatusOr<std::shared_ptr<const Glossary>> StoredGlossary(const v1::TranslateRequest& request,
                                                               const GlossaryCache* glossaries) {
  if (request.glossary_id().empty()) return nullptr;
  if (glossaries == nullptr) {
    return absl::NotFoundError(
        "glossary_id: no glossary is stored here; send the entries in glossary");
  }
  return glossaries->Find(request.glossary_id());
}

// The constraints of the glossary terms found in `texts` (the sources' texts), into p: the
// stored glossary's terms (compiled once, shared by every request that names it), then the
// request's own.
absl::Status PrepareGlossary(const v1::TranslateRequest& request, const RequestLimits& limits,
                             const GlossaryCache* glossaries, const std::vector<std::string>& texts,
                             PreparedRequest* p) {
  GLOSSA_ASSIGN_OR_RETURN(const std::shared_ptr<const Glossary> stored,
                          StoredGlossary(request, glossaries));
  GLOSSA_ASSIGN_OR_RETURN(std::vector<GlossaryTerm> terms, RequestTerms(request, limits));
  if (stored == nullptr && terms.empty()) return absl::OkStatus();
  if (p->search.sampling.temperature > 0.0f) {
    return absl::InvalidArgumentError(
        "a glossary is enforced by beam search: it does not go with sampling "
        "(sampling_temperature)");
  }
  if (p->search.beam_size < 2) {
    return absl::InvalidArgumentError(
        "a glossary is enforced by beam search: set beam_size to 2 or more, or leave it 0 for "
        "the server's default (when that is 2 or more)");
  }
  std::vector<const CompiledGlossary*> parts;
  std::shared_ptr<const CompiledGlossary> compiled;
  if (stored != nullptr) {
    GLOSSA_ASSIGN_OR_RETURN(compiled, glossaries->Compiled(stored));
    parts.push_back(compiled.get());
  }
  std::optional<CompiledGlossary> own;
  if (!terms.empty()) {
    const size_t first = stored == nullptr ? 0 : stored->entries.size();
    GLOSSA_ASSIGN_OR_RETURN(own, CompiledGlossary::Compile(std::move(terms), first));
    parts.push_back(&*own);
  }
  GLOSSA_ASSIGN_OR_RETURN(p->constraints,
                          GlossaryConstraints(*p->model->model, texts, p->sources, parts,
                                              limits.max_glossary_terms_per_text));
  return absl::OkStatus();
}

}  // namespace

bool ParseTranslateRequest(const void* data, size_t size, v1::TranslateRequest* request) {
  internal::RawTranslateRequest raw;
  if (size > INT_MAX || !raw.ParseFromArray(data, static_cast<int>(size))) return false;
  // The string fields come out as bytes; the rest (numbers, and fields the raw message does not
  // name) goes through the public parser. A string field may hold any bytes in memory; only the
  // parser insists on UTF-8.
  const bool had_options = raw.has_options();
  std::string model = std::move(*raw.mutable_model());
  std::string source_language = std::move(*raw.mutable_source_language());
  std::string target_language = std::move(*raw.mutable_target_language());
  std::string prefix;
  if (had_options) prefix = std::move(*raw.mutable_options()->mutable_target_prefix());
  google::protobuf::RepeatedPtrField<std::string> texts;
  texts.Swap(raw.mutable_texts());
  google::protobuf::RepeatedPtrField<internal::RawGlossaryEntry> glossary;
  glossary.Swap(raw.mutable_glossary());
  std::string glossary_id = std::move(*raw.mutable_glossary_id());
  raw.clear_glossary_id();
  raw.clear_model();
  raw.clear_source_language();
  raw.clear_target_language();
  if (had_options) raw.mutable_options()->clear_target_prefix();
  if (!request->ParseFromString(raw.SerializeAsString())) return false;
  request->set_model(std::move(model));
  request->set_source_language(std::move(source_language));
  request->set_target_language(std::move(target_language));
  for (std::string& text : texts) request->add_texts(std::move(text));
  request->set_glossary_id(std::move(glossary_id));
  for (internal::RawGlossaryEntry& raw_entry : glossary) {
    v1::GlossaryEntry* entry = request->add_glossary();
    entry->set_source(std::move(*raw_entry.mutable_source()));
    for (std::string& target : *raw_entry.mutable_targets()) entry->add_targets(std::move(target));
  }
  if (had_options) request->mutable_options()->set_target_prefix(std::move(prefix));
  return true;
}

namespace {

// inline_tags: each text's tags into p->tagged, the text without them in their place.
absl::Status TakeInlineTags(bool stream, std::vector<std::string>* texts, PreparedRequest* p) {
  if (stream) {
    return absl::InvalidArgumentError(
        "TranslateStream does not take inline_tags: use Translate, which places the tags once the "
        "translation is whole");
  }
  GLOSSA_ASSIGN_OR_RETURN(p->tagged, ParseTaggedTexts(*texts));
  for (size_t i = 0; i < texts->size(); ++i) (*texts)[i] = p->tagged[i].text;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PreparedRequest> PrepareRequest(const v1::TranslateRequest& request,
                                               const ModelRegistry& registry,
                                               const RequestLimits& limits, bool stream,
                                               const GlossaryCache* glossaries) {
  PreparedRequest p;
  GLOSSA_ASSIGN_OR_RETURN(p.model, registry.Find(request.model()));
  const int n = request.texts_size();
  if (stream && n != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("TranslateStream takes exactly one text, got ", n, ": use Translate for lists"));
  }
  if (n > limits.max_texts) {
    return absl::InvalidArgumentError(absl::StrCat("the request holds ", n,
                                                   " texts; the limit is ", limits.max_texts,
                                                   ": split it into several requests"));
  }
  for (int i = 0; i < n; ++i) {
    const int64_t bytes = static_cast<int64_t>(request.texts(i).size());
    if (bytes > limits.max_text_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("text ", i, " is ", bytes,
                                                     " bytes; the limit is ", limits.max_text_bytes,
                                                     ": split long texts into sentences"));
    }
  }
  GLOSSA_ASSIGN_OR_RETURN(TranslateOptions options, ToOptions(request.options()));
  p.return_alignment = options.alignment;
  options.alignment = options.alignment || request.inline_tags();  // tags are placed by it
  GLOSSA_RETURN_IF_ERROR(CheckLanguageField("source_language", request.source_language()));
  GLOSSA_RETURN_IF_ERROR(CheckLanguageField("target_language", request.target_language()));
  options.source_language = request.source_language();
  options.target_language = request.target_language();
  GLOSSA_ASSIGN_OR_RETURN(p.search, p.model->engine->Resolve(options));
  p.return_scores = request.options().return_scores();
  p.deterministic =
      !(request.options().sampling_temperature() > 0.0f && request.options().seed() == 0);
  switch (request.priority()) {
    case v1::PRIORITY_UNSPECIFIED:
    case v1::PRIORITY_INTERACTIVE:
      p.lane = Lane::kInteractive;
      break;
    case v1::PRIORITY_BATCH:
      p.lane = Lane::kBatch;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "priority ", request.priority(), " is not one of PRIORITY_UNSPECIFIED (0), "
          "PRIORITY_INTERACTIVE (1), PRIORITY_BATCH (2)"));
  }
  const Model& model = *p.model->model;
  GLOSSA_ASSIGN_OR_RETURN(const LanguagePair languages,
                          ResolveLanguages(model.info(), model.tokenizer(), options.source_language,
                                           options.target_language));
  std::vector<std::string> texts(request.texts().begin(), request.texts().end());
  if (request.inline_tags()) GLOSSA_RETURN_IF_ERROR(TakeInlineTags(stream, &texts, &p));
  if (request.split_sentences()) {
    if (stream) {
      return absl::InvalidArgumentError(
          "TranslateStream translates its text as one sentence: use Translate for split_sentences");
    }
    // The locale of the sentence rules: the request's source language, else the model's.
    const std::string& language = request.source_language().empty()
                                      ? model.info().source_language
                                      : request.source_language();
    GLOSSA_ASSIGN_OR_RETURN(Documents documents,
                            SplitDocuments(model, texts, language, limits.max_text_tokens));
    texts = documents.sentences;
    p.documents = std::make_shared<const Documents>(std::move(documents));
  }
  GLOSSA_ASSIGN_OR_RETURN(p.sources, TokenizeTexts(model, texts, limits.max_text_tokens,
                                                   languages.source_token));
  p.source_token = languages.source_token;
  GLOSSA_RETURN_IF_ERROR(PrepareGlossary(request, limits, glossaries, texts, &p));
  return p;
}

void ToProto(const Translation& translation, bool return_scores, v1::Translation* out) {
  for (const TranslatedHypothesis& h : translation.hypotheses) {
    v1::Hypothesis* hyp = out->add_hypotheses();
    hyp->set_text(h.text);
    if (return_scores) hyp->set_score(h.score);
    hyp->mutable_token_ids()->Add(h.token_ids.begin(), h.token_ids.end());
    hyp->mutable_token_scores()->Add(h.token_scores.begin(), h.token_scores.end());
    hyp->mutable_alignment()->Add(h.alignment.begin(), h.alignment.end());
  }
}

}  // namespace glossa::server
