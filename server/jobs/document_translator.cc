#include "server/jobs/document_translator.h"

#include <algorithm>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/status_util.h"
#include "server/files/read_document.h"
#include "server/http_api/http_api.h"
#include "server/http_api/libretranslate.h"
#include "server/request/routing.h"
#include "server/text/language_detector.h"
#include "server/text/placeholders.h"
#include "util/status_macros.h"

namespace glossa::server {
namespace {

// Detection reads this much of a document's text: enough for CLD2, bounded for a large file.
constexpr size_t kDetectBytes = 256 << 10;

// The text "auto" detects from: the segments, one a line, up to kDetectBytes (whole segments,
// so the text stays UTF-8), without their placeholders.
std::string DetectionText(const std::vector<std::string>& segments, bool inline_tags) {
  std::string out;
  for (const std::string& segment : segments) {
    const std::string text = inline_tags ? PlainText(segment) : segment;
    if (!out.empty() && out.size() + text.size() > kDetectBytes) break;
    absl::StrAppend(&out, out.empty() ? "" : "\n", text);
  }
  return out;
}

int64_t TextBytes(const std::vector<std::string>& texts) {
  int64_t bytes = 0;
  for (const std::string& text : texts) bytes += static_cast<int64_t>(text.size());
  return bytes;
}

}  // namespace

std::string TranslatedFileName(absl::string_view file_name, absl::string_view target) {
  const size_t slash = file_name.find_last_of("/\\");
  if (slash != absl::string_view::npos) file_name = file_name.substr(slash + 1);
  const size_t dot = file_name.rfind('.');
  if (dot == absl::string_view::npos || dot == 0) return absl::StrCat(file_name, ".", target);
  return absl::StrCat(file_name.substr(0, dot), ".", target, file_name.substr(dot));
}

absl::StatusOr<std::vector<std::string>> DocumentTranslator::TranslateSegments(
    const std::vector<std::string>& texts, bool inline_tags, const DocumentJob& job,
    const std::string& source, absl::Time deadline, RpcRecord* record,
    DocumentProgress* progress) const {
  std::vector<std::string> out;
  out.reserve(texts.size());
  size_t next = 0;
  while (next < texts.size()) {
    if (progress->cancelled.load()) {
      return absl::CancelledError(absl::StrCat("the document was cancelled with ", next,
                                               " of its ", texts.size(), " segments translated"));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("the document's deadline passed with ", next, " of its ", texts.size(),
                       " segments translated (--document_timeout, or the call's deadline)"));
    }
    v1::TranslateRequest request;
    request.set_model(job.model);
    request.set_source_language(source);
    request.set_target_language(job.target);
    request.set_split_sentences(true);  // as /translate's format=text
    const size_t first = next;
    int64_t bytes = 0;
    while (next < texts.size() && request.texts_size() < options_.batch_texts &&
           (request.texts_size() == 0 ||
            bytes + static_cast<int64_t>(texts[next].size()) <= options_.batch_bytes)) {
      bytes += static_cast<int64_t>(texts[next].size());
      request.add_texts(texts[next++]);
    }
    request.set_inline_tags(inline_tags &&
                            std::any_of(request.texts().begin(), request.texts().end(), HasMarkup));
    const absl::Duration timeout = std::min(options_.timeout, deadline - absl::Now());
    auto response = TranslateAndWait(*service_, request, std::max(timeout, absl::ZeroDuration()),
                                     record, &progress->cancelled);
    if (!response.ok()) {
      // The service's message counts texts within one request: name the file's segments.
      return absl::Status(response.status().code(),
                          absl::StrCat("segments ", first + 1, " to ", next,
                                       " of the file: ", response.status().message()));
    }
    for (int k = 0; k < response->translations_size(); ++k) {
      const v1::Translation& t = response->translations(k);
      out.push_back(t.hypotheses_size() > 0 ? t.hypotheses(0).text() : std::string());
    }
    progress->segments_done.store(static_cast<int64_t>(out.size()));
  }
  if (out.size() != texts.size()) return absl::InternalError("a translation is missing");
  return out;
}

absl::StatusOr<TranslatedDocument> DocumentTranslator::Translate(
    const DocumentJob& job, absl::Time deadline, RpcRecord* record, DocumentProgress* progress,
    MemoryBudget::Reservation* memory) const {
  deadline = std::min(deadline, absl::Now() + options_.document_timeout);
  DocumentProgress own_progress;
  if (progress == nullptr) progress = &own_progress;
  MemoryBudget::Reservation no_memory;
  if (memory == nullptr) memory = &no_memory;
  if (job.bytes.empty()) return absl::InvalidArgumentError("empty file");
  if (static_cast<int64_t>(job.bytes.size()) > options_.max_file_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the file is ", job.bytes.size(), " bytes; the limit is ", options_.max_file_bytes));
  }
  DocumentLimits limits;
  limits.max_bytes = options_.max_file_bytes;
  limits.reserve = [memory](int64_t bytes) { return memory->Grow(bytes); };
  GLOSSA_ASSIGN_OR_RETURN(const std::unique_ptr<Document> document,
                          ReadDocument(job.file_name, job.bytes, limits));
  // The segments, their translations and the file written: about three times the text.
  GLOSSA_RETURN_IF_ERROR(memory->Grow(3 * TextBytes(document->texts())));
  progress->segments_total.store(static_cast<int64_t>(document->texts().size()));
  GLOSSA_ASSIGN_OR_RETURN(const std::string source, SourceOf(job, *document));
  if (job.model.empty()) GLOSSA_RETURN_IF_ERROR(CheckLibrePair(*service_, source, job.target));
  GLOSSA_ASSIGN_OR_RETURN(const std::vector<std::string> translations,
                          TranslateSegments(document->texts(), document->inline_tags(), job,
                                            source, deadline, record, progress));
  GLOSSA_ASSIGN_OR_RETURN(std::string written, document->Write(translations));
  return TranslatedDocument{TranslatedFileName(job.file_name, job.target), std::move(written),
                            source, static_cast<int64_t>(translations.size())};
}

absl::StatusOr<std::string> DocumentTranslator::SourceOf(const DocumentJob& job,
                                                         const Document& document) const {
  if (job.source != "auto") return job.source;
  const std::set<std::string> candidates =
      AutoCandidates(service_->registry(), job.model, job.target, service_->pivot_language());
  if (candidates.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteForMessage(job.target), " is not supported"));
  }
  GLOSSA_ASSIGN_OR_RETURN(
      const DetectedLanguage detected,
      DetectAmong(DetectionText(document.texts(), document.inline_tags()), candidates));
  return detected.language;
}

}  // namespace glossa::server
