#include "server/documents/document.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/documents/markdown.h"
#include "server/documents/segments.h"
#include "server/documents/subtitles.h"
#include "server/text/html_text.h"
#include "text/tokenizer.h"

namespace glossa::server {
namespace {

enum class Format { kText, kMarkdown, kSubRip, kWebVtt, kHtml };

struct FormatName {
  const char* extension;
  Format format;
};
constexpr FormatName kFormats[] = {
    {".txt", Format::kText},   {".md", Format::kMarkdown}, {".markdown", Format::kMarkdown},
    {".srt", Format::kSubRip}, {".vtt", Format::kWebVtt},  {".html", Format::kHtml},
    {".htm", Format::kHtml},
};

}  // namespace

std::string DocumentExtension(absl::string_view file_name) {
  const size_t slash = file_name.find_last_of("/\\");
  if (slash != absl::string_view::npos) file_name.remove_prefix(slash + 1);
  const size_t dot = file_name.rfind('.');
  if (dot == absl::string_view::npos || dot == 0) return "";
  return absl::AsciiStrToLower(file_name.substr(dot));
}

namespace {

std::string FormatList() { return absl::StrJoin(TextDocumentFormats(), ", "); }

// Each non-blank line is a segment, its blanks at both ends outside it.
void ReadPlainText(absl::string_view source, size_t from, SegmentBuilder* out) {
  for (const Line& line : SplitLines(source, from)) {
    out->Text(line.begin, line.end);
    out->Cut();
  }
}

// HTML through html_text.h; text nodes without a letter are not segments, and a node's blanks at
// both ends stay outside its segment.
class HtmlDocument : public Document {
 public:
  static absl::StatusOr<std::unique_ptr<Document>> Read(std::string source,
                                                        const DocumentLimits& limits);
  absl::StatusOr<std::string> Write(const std::vector<std::string>& translations) const override;
  bool inline_tags() const override { return true; }

 private:
  std::string source_;
  std::vector<std::pair<size_t, size_t>> spans_;
  std::vector<std::vector<Markup>> markup_;
};

bool IsHtmlBlank(char c) { return IsBlank(c) || c == '\n'; }

absl::StatusOr<std::unique_ptr<Document>> HtmlDocument::Read(std::string source,
                                                             const DocumentLimits& limits) {
  absl::StatusOr<HtmlText> html = ExtractHtmlText(source);
  if (!html.ok()) return html.status();
  auto document = std::make_unique<HtmlDocument>();
  for (size_t i = 0; i < html->texts.size(); ++i) {
    absl::string_view text = html->texts[i];
    if (!HasLetter(PlainText(text))) continue;
    auto [begin, end] = html->spans[i];
    // The blanks at both ends, out of the text and out of the source (the parser reads "\r\n"
    // as "\n", so they need not be the same bytes).
    while (IsHtmlBlank(text.front())) text.remove_prefix(1);
    while (IsHtmlBlank(text.back())) text.remove_suffix(1);
    while (begin < end && IsHtmlBlank(source[begin])) ++begin;
    while (end > begin && IsHtmlBlank(source[end - 1])) --end;
    if (static_cast<int64_t>(document->texts_.size()) >= limits.max_segments) {
      return absl::InvalidArgumentError(
          absl::StrCat("the file has more than ", limits.max_segments, " segments to translate"));
    }
    document->texts_.emplace_back(text);
    document->spans_.emplace_back(begin, end);
    document->markup_.push_back(std::move(html->markup[i]));
  }
  document->source_ = std::move(source);
  return document;
}

absl::StatusOr<std::string> HtmlDocument::Write(
    const std::vector<std::string>& translations) const {
  if (translations.size() != texts_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the document has ", texts_.size(), " segments, not ", translations.size()));
  }
  // Only changed text is written (escaped): unchanged text keeps its character references.
  HtmlText changed;
  std::vector<std::string> changed_translations;
  for (size_t i = 0; i < texts_.size(); ++i) {
    if (translations[i] == texts_[i]) continue;
    changed.spans.push_back(spans_[i]);
    changed.markup.push_back(markup_[i]);
    changed_translations.push_back(translations[i]);
  }
  return ReplaceHtmlText(source_, changed, changed_translations);
}

absl::StatusOr<std::unique_ptr<Document>> ReadSegmented(Format format, std::string bytes,
                                                        const DocumentLimits& limits) {
  const absl::string_view source(bytes);
  const size_t from = absl::StartsWith(source, kUtf8Bom) ? kUtf8Bom.size() : 0;
  SegmentBuilder segments(source, limits.max_segments);
  switch (format) {
    case Format::kText:
      ReadPlainText(source, from, &segments);
      break;
    case Format::kMarkdown:
      ReadMarkdown(source, from, &segments);
      break;
    case Format::kSubRip:
    case Format::kWebVtt:
      ReadSubtitles(source, from, format == Format::kWebVtt, &segments);
      break;
    case Format::kHtml:
      break;
  }
  if (segments.over_limit()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the file has more than ", limits.max_segments, " segments to translate"));
  }
  return std::make_unique<SegmentedDocument>(std::move(bytes), std::move(segments),
                                             format == Format::kMarkdown);
}

}  // namespace

std::vector<std::string> TextDocumentFormats() {
  std::vector<std::string> out;
  for (const FormatName& f : kFormats) out.push_back(f.extension);
  return out;
}

absl::StatusOr<std::unique_ptr<Document>> ReadTextDocument(absl::string_view file_name,
                                                           std::string bytes,
                                                           const DocumentLimits& limits) {
  const std::string extension = DocumentExtension(file_name);
  if (extension == ".pdf") {
    return absl::InvalidArgumentError(
        absl::StrCat("PDF is not supported; supported formats: ", FormatList()));
  }
  const FormatName* format = nullptr;
  for (const FormatName& f : kFormats) {
    if (extension == f.extension) format = &f;
  }
  if (format == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported file format ", extension.empty() ? "(no extension)" : extension,
                     " in \"", file_name, "\"; supported formats: ", FormatList()));
  }
  if (static_cast<int64_t>(bytes.size()) > limits.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the file has ", bytes.size(),
                                                   " bytes, more than the limit of ",
                                                   limits.max_bytes, ": send it in parts"));
  }
  if (!IsValidUtf8(bytes)) {
    // Subtitles and text from Windows programs are often UTF-16, which starts with its BOM.
    const bool utf16 = absl::StartsWith(bytes, "\xFF\xFE") || absl::StartsWith(bytes, "\xFE\xFF");
    return absl::InvalidArgumentError(absl::StrCat(
        "the file is not UTF-8 text", utf16 ? " (it is UTF-16)" : "", ": save it as UTF-8"));
  }
  if (format->format == Format::kHtml) return HtmlDocument::Read(std::move(bytes), limits);
  return ReadSegmented(format->format, std::move(bytes), limits);
}

}  // namespace glossa::server
