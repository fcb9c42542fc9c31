#include "server/files/office.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/files/archive.h"
#include "server/files/xml_paragraphs.h"

namespace glossa::server {
namespace {

struct OfficeFormat {
  const char* extension;
  const char* main_entry;  // an entry every such file has
  // The entries translated, '|' between names: '#' stands for digits (none or more), a leading
  // '*' for any start.
  const char* parts;
  const XmlDialect* (*dialect)();  // nullptr: (X)HTML
};

const XmlDialect* Word() { return &WordDialect(); }
const XmlDialect* Drawing() { return &DrawingDialect(); }
const XmlDialect* Spreadsheet() { return &SpreadsheetDialect(); }
const XmlDialect* OpenDocument() { return &OpenDocumentDialect(); }

constexpr OfficeFormat kOfficeFormats[] = {
    {".docx", "word/document.xml",
     "word/document.xml|word/header#.xml|word/footer#.xml|word/footnotes.xml|word/endnotes.xml|"
     "word/comments.xml",
     Word},
    {".pptx", "ppt/presentation.xml", "ppt/slides/slide#.xml|ppt/notesSlides/notesSlide#.xml",
     Drawing},
    {".xlsx", "xl/workbook.xml", "xl/sharedStrings.xml|xl/worksheets/sheet#.xml", Spreadsheet},
    {".odt", "content.xml", "content.xml", OpenDocument},
    {".odp", "content.xml", "content.xml", OpenDocument},
    {".epub", "META-INF/container.xml", "*.xhtml|*.html|*.htm", nullptr},
};

// Whether an entry's name is one of `parts` (OfficeFormat::parts). (Not std::regex: its
// scanner's shared locale cache is a data race when two threads build one.)
bool IsPart(absl::string_view name, absl::string_view parts) {
  for (absl::string_view p : absl::StrSplit(parts, '|')) {
    if (absl::StartsWith(p, "*")) {
      if (absl::EndsWith(name, p.substr(1))) return true;
      continue;
    }
    const size_t hash = p.find('#');
    if (hash == absl::string_view::npos) {
      if (name == p) return true;
      continue;
    }
    const absl::string_view prefix = p.substr(0, hash), suffix = p.substr(hash + 1);
    if (name.size() < prefix.size() + suffix.size() || !absl::StartsWith(name, prefix) ||
        !absl::EndsWith(name, suffix)) {
      continue;
    }
    const absl::string_view digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit)) return true;
  }
  return false;
}

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
  ArchiveLimits archive_limits;
  archive_limits.reserve = limits.reserve;
  auto entries = ReadArchive(bytes, what, archive_limits);
  if (!entries.ok()) return entries.status();
  bool has_main = false;
  for (const ArchiveEntry& e : *entries) has_main = has_main || e.name == format->main_entry;
  if (!has_main) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has no ", format->main_entry, ": it is not a ", extension, " file"));
  }
  std::vector<std::pair<size_t, std::unique_ptr<Document>>> found;
  size_t segments = 0;
  for (size_t i = 0; i < entries->size(); ++i) {
    const ArchiveEntry& entry = (*entries)[i];
    if (!IsPart(entry.name, format->parts)) continue;
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
