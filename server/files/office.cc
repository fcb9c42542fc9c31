#include "server/files/office.h"

#include <regex>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/files/archive.h"
#include "server/files/xml_paragraphs.h"

namespace glossa::server {
namespace {

struct OfficeFormat {
  const char* extension;
  const char* main_entry;          // an entry every such file has
  const char* parts;               // the entries translated (a regular expression)
  const XmlDialect* (*dialect)();  // nullptr: (X)HTML
};

const XmlDialect* Word() { return &WordDialect(); }
const XmlDialect* Drawing() { return &DrawingDialect(); }
const XmlDialect* Spreadsheet() { return &SpreadsheetDialect(); }
const XmlDialect* OpenDocument() { return &OpenDocumentDialect(); }

constexpr OfficeFormat kOfficeFormats[] = {
    {".docx", "word/document.xml",
     "word/(document|header[0-9]*|footer[0-9]*|footnotes|endnotes|comments)\\.xml", Word},
    {".pptx", "ppt/presentation.xml", "ppt/(slides/slide|notesSlides/notesSlide)[0-9]+\\.xml",
     Drawing},
    {".xlsx", "xl/workbook.xml", "xl/(sharedStrings|worksheets/sheet[0-9]+)\\.xml", Spreadsheet},
    {".odt", "content.xml", "content\\.xml", OpenDocument},
    {".odp", "content.xml", "content\\.xml", OpenDocument},
    {".epub", "META-INF/container.xml", ".*\\.(xhtml|html|htm)", nullptr},
};

// One XML part's paragraphs as a document of their own.
class XmlPart : public Document {
 public:
  XmlPart(std::string xml, const XmlDialect* dialect, std::vector<std::string> texts)
      : xml_(std::move(xml)), dialect_(dialect) {
    texts_ = std::move(texts);
  }
  absl::StatusOr<std::string> Write(const std::vector<std::string>& translations) const override {
    return WriteXmlParagraphs(xml_, *dialect_, translations);
  }
  bool inline_tags() const override { return true; }

 private:
  std::string xml_;
  const XmlDialect* dialect_;
};

class OfficeDocument : public Document {
 public:
  OfficeDocument(std::string bytes, std::vector<ArchiveEntry> entries)
      : bytes_(std::move(bytes)), entries_(std::move(entries)) {}

  void AddPart(size_t entry, std::unique_ptr<Document> part) {
    texts_.insert(texts_.end(), part->texts().begin(), part->texts().end());
    parts_.push_back({entry, std::move(part)});
  }

  absl::StatusOr<std::string> Write(const std::vector<std::string>& translations) const override {
    if (translations.size() != texts_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the document has ", texts_.size(), " segments, not ", translations.size()));
    }
    std::vector<ArchiveEntry> entries = entries_;
    bool changed = false;
    size_t next = 0;
    for (const Part& part : parts_) {
      const size_t n = part.document->texts().size();
      const std::vector<std::string> mine(translations.begin() + next,
                                          translations.begin() + next + n);
      next += n;
      auto written = part.document->Write(mine);
      if (!written.ok()) return written.status();
      if (*written == entries[part.entry].data) continue;
      entries[part.entry].data = *std::move(written);
      changed = true;
    }
    return changed ? WriteArchive(entries) : bytes_;
  }
  bool inline_tags() const override { return true; }

 private:
  struct Part {
    size_t entry;
    std::unique_ptr<Document> document;
  };
  const std::string bytes_;
  const std::vector<ArchiveEntry> entries_;
  std::vector<Part> parts_;
};

}  // namespace

const std::vector<std::string>& OfficeFormats() {
  static const auto* formats = [] {
    auto* out = new std::vector<std::string>;
    for (const OfficeFormat& f : kOfficeFormats) out->push_back(f.extension);
    return out;
  }();
  return *formats;
}

absl::StatusOr<std::unique_ptr<Document>> ReadOfficeDocument(absl::string_view extension,
                                                             std::string bytes,
                                                             const DocumentLimits& limits) {
  const OfficeFormat* format = nullptr;
  for (const OfficeFormat& f : kOfficeFormats) {
    if (extension == f.extension) format = &f;
  }
  if (format == nullptr) return absl::InvalidArgumentError("not an office format");
  const std::string what = absl::StrCat("the ", extension, " file");
  auto entries = ReadArchive(bytes, what);
  if (!entries.ok()) return entries.status();
  bool has_main = false;
  for (const ArchiveEntry& e : *entries) has_main = has_main || e.name == format->main_entry;
  if (!has_main) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has no ", format->main_entry, ": it is not a ", extension, " file"));
  }
  const std::regex parts(format->parts);
  std::vector<std::pair<size_t, std::unique_ptr<Document>>> found;
  size_t segments = 0;
  for (size_t i = 0; i < entries->size(); ++i) {
    const ArchiveEntry& entry = (*entries)[i];
    if (!std::regex_match(entry.name, parts)) continue;
    std::unique_ptr<Document> part;
    if (format->dialect == nullptr) {
      auto html = ReadTextDocument("part.html", entry.data, limits);
      if (!html.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": ", entry.name, ": ", html.status().message()));
      }
      part = *std::move(html);
    } else {
      auto texts =
          ReadXmlParagraphs(entry.data, *format->dialect(), absl::StrCat(what, ": ", entry.name));
      if (!texts.ok()) return texts.status();
      part = std::make_unique<XmlPart>(entry.data, format->dialect(), *std::move(texts));
    }
    segments += part->texts().size();
    if (static_cast<int64_t>(segments) > limits.max_segments) {
      return absl::InvalidArgumentError(
          absl::StrCat("the file has more than ", limits.max_segments, " segments to translate"));
    }
    found.emplace_back(i, std::move(part));
  }
  auto document = std::make_unique<OfficeDocument>(std::move(bytes), *std::move(entries));
  for (auto& [entry, part] : found) document->AddPart(entry, std::move(part));
  return document;
}

}  // namespace glossa::server
