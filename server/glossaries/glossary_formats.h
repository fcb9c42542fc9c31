// Glossary entries as files and messages: TSV, CSV and JSON parsed into GlossaryEntry messages,
// entries given as messages checked by the same rules, and entries written back as TSV.
//
//   tsv   source TAB target, a pair per line
//   csv   source,target, a pair per record (RFC 4180: "quoted, ""with"" quotes")
//   json  {"source": "target", "other source": ["target", "alternative"], ...}
//
// In TSV and CSV a source term that comes again adds an alternative target to its entry (in the
// order given); entries keep the order of their first line. Empty lines are skipped, a UTF-8 byte
// order mark at the start and "\r\n" line endings are accepted, and spaces around a term are
// dropped. Every error is INVALID_ARGUMENT and says where (the 1-based line, or entries[i] for
// messages) and what: an empty term, a wrong column count, invalid UTF-8, a pair given twice, a
// control character, a term over the byte limit, too many entries or bytes.
#ifndef GLOSSA_SERVER_GLOSSARIES_GLOSSARY_FORMATS_H_
#define GLOSSA_SERVER_GLOSSARIES_GLOSSARY_FORMATS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "glossa/v1/translator.pb.h"

namespace glossa::server {

// The bounds of one glossary and of a store of them (see GlossaryStore).
struct GlossaryLimits {
  int max_glossaries = 1000;    // glossaries in a store
  int max_entries = 10000;      // entries (source terms) in one glossary
  // One glossary as held in memory: every source and target term's bytes plus
  // kTermOverheadBytes each (its string, its entry, the duplicate check, the matcher).
  int64_t max_bytes = 1 << 20;
  int max_term_bytes = 256;     // one source or target term
  int max_targets = 16;         // target terms of one source term
  // Every glossary of a store together, each counted as max_bytes counts one (GlossaryHeldBytes).
  int64_t max_store_bytes = int64_t{64} << 20;
};

// What a term costs in memory besides its bytes, as GlossaryLimits::max_bytes counts it (seen:
// 10,000 sources of 20 two-byte targets each grew a server by 66 MB, about 300 bytes a term).
inline constexpr int64_t kTermOverheadBytes = 256;

// What `entries` hold in memory as GlossaryLimits::max_bytes counts it: every source and target
// term's bytes plus kTermOverheadBytes each.
int64_t GlossaryHeldBytes(const std::vector<v1::GlossaryEntry>& entries);

enum class GlossaryFormat { kTsv, kCsv, kJson };

// "tsv", "csv" or "json" (any case).
absl::StatusOr<GlossaryFormat> ParseGlossaryFormat(absl::string_view name);
// By a file name's extension: .tsv or .tab, .csv, .json.
absl::StatusOr<GlossaryFormat> GlossaryFormatOfPath(absl::string_view path);
absl::string_view GlossaryFormatName(GlossaryFormat format);

// The entries of `text`; at least one.
absl::StatusOr<std::vector<v1::GlossaryEntry>> ParseGlossaryEntries(
    absl::string_view text, GlossaryFormat format, const GlossaryLimits& limits = {});

// Checks entries given as messages: every rule of the text formats, and a source term given in
// two entries (its targets belong in one entry's list). At least one entry.
absl::Status ValidateGlossaryEntries(const std::vector<v1::GlossaryEntry>& entries,
                                     const GlossaryLimits& limits = {});

// One "source\ttarget\n" line per pair, alternatives on lines of their own: ParseGlossaryEntries
// of the result gives the entries back.
std::string ToTsv(const std::vector<v1::GlossaryEntry>& entries);

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF).
bool IsUtf8(absl::string_view text);
// Empty when `text` may be a term (or a glossary's name): UTF-8 without control characters (C0,
// DEL, C1, U+2028, U+2029); otherwise what is wrong, e.g. "holds a control character (U+0009)".
std::string TextProblem(absl::string_view text);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_GLOSSARIES_GLOSSARY_FORMATS_H_
