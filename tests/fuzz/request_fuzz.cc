// Fuzzes request validation as TranslatorService::Prepare runs it, without gRPC: the input is a
// request's wire bytes, parsed by ParseTranslateRequest (through internal::RawTranslateRequest),
// routed (RouteRequest: routing by language, the pivot, "auto" detection), then each part through
// PrepareRequest against the demo model (model lookup, text count and size limits, options,
// Engine::Resolve, UTF-8 check, tokenization and the token limit), for Translate and for
// TranslateStream, against a registry with one model and one with two. Checks that an accepted
// request is within every limit the engine relies on, and that a refusal is INVALID_ARGUMENT or
// NOT_FOUND with a message.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "server/models/model_registry.h"
#include "server/request/request.h"
#include "server/request/routing.h"
#include "text/sentences.h"
#include "text/tokenizer.h"

namespace {

using glossa::server::ModelRegistry;

glossa::EngineOptions Options() {
  glossa::EngineOptions options;
  options.workers = 0;  // no step loop: nothing is submitted
  return options;
}

// Registries are loaded once per process and never destroyed.
const ModelRegistry& Registry(bool two_models) {
  static const ModelRegistry* one = [] {
    auto r = ModelRegistry::Load({"opus-mt-es-en=" GLOSSA_DEMO_MODEL}, Options());
    FUZZ_CHECK(r.ok(), "cannot load the demo model");
    return r->release();
  }();
  static const ModelRegistry* two = [] {
    auto r = ModelRegistry::Load({"opus-mt-es-en=" GLOSSA_DEMO_MODEL, "es-en=" GLOSSA_DEMO_MODEL},
                                 Options());
    FUZZ_CHECK(r.ok(), "cannot load the demo model twice");
    return r->release();
  }();
  return two_models ? *two : *one;
}

// Every text is its gaps and sentences, in order, byte for byte; no sentence is empty or has
// spaces at its ends.
void CheckDocuments(const glossa::Documents& d, const std::vector<std::string>& texts) {
  FUZZ_CHECK(d.texts.size() == texts.size(), "a layout per text");
  size_t next = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const glossa::Documents::Layout& layout = d.texts[i];
    FUZZ_CHECK(!layout.gaps.empty() && layout.first == next, "layouts out of order");
    const size_t n = layout.gaps.size() - 1;
    FUZZ_CHECK(layout.first + n <= d.sentences.size(), "a layout past the sentences");
    std::string rebuilt = layout.gaps[0];
    for (size_t j = 0; j < n; ++j) {
      const std::string& sentence = d.sentences[layout.first + j];
      FUZZ_CHECK(!sentence.empty() && !glossa::IsLayoutSpace(sentence.front()) &&
                     !glossa::IsLayoutSpace(sentence.back()),
                 "an empty sentence, or one with spaces at an end");
      rebuilt += sentence + layout.gaps[j + 1];
    }
    FUZZ_CHECK(rebuilt == texts[i], "a text does not rebuild from its sentences");
    next = layout.first + n;
  }
  FUZZ_CHECK(next == d.sentences.size(), "sentences of no text");
}

void CheckPrepared(const glossa::server::PreparedRequest& p,
                   const glossa::v1::TranslateRequest& request,
                   const glossa::server::RequestLimits& limits, bool stream) {
  FUZZ_CHECK(p.model != nullptr, "no model");
  FUZZ_CHECK(request.model().empty() || request.model() == p.model->name, "another model");
  const glossa::ModelConfig& c = p.model->model->config();
  const int n = request.texts_size();
  FUZZ_CHECK(n <= limits.max_texts && (!stream || n == 1), "too many texts accepted");
  for (const std::string& text : request.texts()) {
    FUZZ_CHECK(static_cast<int64_t>(text.size()) <= limits.max_text_bytes, "a text over the limit");
    FUZZ_CHECK(glossa::fuzz::ReferenceUtf8Valid(text), "invalid UTF-8 accepted");
  }
  // With inline_tags the engine translates each text without its tags; with split_sentences,
  // the sentences, which must rebuild each of those texts.
  std::vector<std::string> texts(request.texts().begin(), request.texts().end());
  if (request.inline_tags()) {
    FUZZ_CHECK(!stream && p.tagged.size() == texts.size(), "inline_tags without a text each");
    for (size_t i = 0; i < texts.size(); ++i) texts[i] = p.tagged[i].text;
  } else {
    FUZZ_CHECK(p.tagged.empty(), "tagged texts without inline_tags");
  }
  if (request.split_sentences()) {
    FUZZ_CHECK(!stream && p.documents != nullptr, "split_sentences accepted without documents");
    CheckDocuments(*p.documents, texts);
    texts = p.documents->sentences;
  } else {
    FUZZ_CHECK(p.documents == nullptr, "documents without split_sentences");
  }
  const glossa::TextSources& s = p.sources;
  FUZZ_CHECK(s.num_texts == texts.size(), "num_texts differs from the texts translated");
  FUZZ_CHECK(s.sources.size() == s.text_index.size(), "sources and text_index differ in size");
  for (size_t k = 0; k < s.sources.size(); ++k) {
    FUZZ_CHECK(s.text_index[k] < s.num_texts && (k == 0 || s.text_index[k] > s.text_index[k - 1]),
               "text_index is not increasing");
    FUZZ_CHECK(!texts[s.text_index[k]].empty(), "an empty text encoded");
    const std::vector<int>& ids = s.sources[k];
    FUZZ_CHECK(!ids.empty() && static_cast<int>(ids.size()) <= c.max_positions,
               "a source outside 1..max_positions tokens");
    FUZZ_CHECK(ids.back() == c.eos_id, "a source without </s>");
    for (int id : ids) {
      FUZZ_CHECK(id >= 0 && id < c.source_vocab_size, "a source id outside the vocabulary");
    }
  }
  const glossa::v1::DecodingOptions& in = request.options();
  for (float v : {in.length_penalty(), in.sampling_temperature(), in.sampling_top_p(),
                  in.repetition_penalty()}) {
    FUZZ_CHECK(!std::isnan(v), "a NaN option accepted");
  }
  FUZZ_CHECK(glossa::fuzz::ReferenceUtf8Valid(in.target_prefix()), "an invalid prefix accepted");
  const glossa::SearchOptions& o = p.search;
  FUZZ_CHECK(o.beam_size >= 1 && o.beam_size <= Options().max_beam_size, "beam_size out of range");
  FUZZ_CHECK(o.num_hypotheses >= 1 && o.num_hypotheses <= o.beam_size,
             "num_hypotheses out of range");
  FUZZ_CHECK(
      o.max_new_tokens >= 1 && o.positions() < p.model->model->info().generation.max_length &&
          o.positions() <= c.max_positions,
      "max_new_tokens (and the prefix) out of range");
  FUZZ_CHECK(std::isfinite(o.repetition_penalty) && o.repetition_penalty > 0.0f,
             "repetition_penalty out of range");
  FUZZ_CHECK(o.no_repeat_ngram_size >= 0 && o.min_new_tokens >= 0 &&
                 o.min_new_tokens < o.max_new_tokens,
             "no_repeat_ngram_size or min_new_tokens out of range");
  for (int id : o.prefix) {
    FUZZ_CHECK(id >= 0 && id < c.target_vocab_size, "a prefix id outside the vocabulary");
  }
  FUZZ_CHECK(std::isfinite(o.length_penalty) && std::fabs(o.length_penalty) <= 10.0f,
             "length_penalty out of range");
  if (o.sampling.temperature > 0.0f) {
    FUZZ_CHECK(o.beam_size == 1 && o.num_hypotheses == 1, "sampling with a beam");
    FUZZ_CHECK(o.sampling.temperature <= 100.0f && o.sampling.top_k >= 0 &&
                   o.sampling.top_p > 0.0f && o.sampling.top_p <= 1.0f,
               "sampling options out of range");
  }
}


void CheckRefusal(const absl::Status& status) {
  FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument ||
                 status.code() == absl::StatusCode::kNotFound,
             "a refusal that is neither INVALID_ARGUMENT nor NOT_FOUND");
  FUZZ_CHECK(!status.message().empty(), "a refusal without a message");
}

// The parts of a routed request hold each of its texts once, in order within a part.
void CheckParts(const glossa::server::RoutedRequest& routed,
                const glossa::v1::TranslateRequest& request) {
  std::vector<int> seen(request.texts_size(), 0);
  FUZZ_CHECK(!routed.parts.empty(), "a routed request without parts");
  for (const auto& part : routed.parts) {
    FUZZ_CHECK(part.request.texts_size() == static_cast<int>(part.texts.size()),
               "a part whose texts and indices differ in number");
    for (size_t k = 0; k < part.texts.size(); ++k) {
      const int i = part.texts[k];
      FUZZ_CHECK(i >= 0 && i < request.texts_size(), "a part with a text index out of range");
      FUZZ_CHECK(part.request.texts(static_cast<int>(k)) == request.texts(i),
                 "a part's text is not the request's");
      ++seen[i];
    }
  }
  for (int n : seen) FUZZ_CHECK(n == 1, "a text in no part, or in two");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  glossa::v1::TranslateRequest given;
  if (!glossa::server::ParseTranslateRequest(data, size, &given)) return 0;
  const glossa::server::RequestLimits limits;  // the server's defaults
  for (bool two_models : {false, true}) {
    auto routed = glossa::server::RouteRequest(given, Registry(two_models), "en");
    if (!routed.ok()) {
      CheckRefusal(routed.status());
      continue;
    }
    CheckParts(*routed, given);
    const glossa::v1::TranslateRequest& request = routed->parts.front().request;
    for (bool stream : {false, true}) {
      auto prepared = glossa::server::PrepareRequest(request, Registry(two_models), limits, stream);
      static const bool verbose = std::getenv("GLOSSA_FUZZ_VERBOSE") != nullptr;
      if (verbose) {
        std::fprintf(stderr, "  %s, %s: %s\n", two_models ? "two models" : "one model",
                     stream ? "TranslateStream" : "Translate",
                     prepared.status().ToString().c_str());
      }
      if (prepared.ok()) {
        CheckPrepared(*prepared, request, limits, stream);
      } else {
        CheckRefusal(prepared.status());
      }
    }
  }
  return 0;
}
