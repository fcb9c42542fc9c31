// Language identification for LibreTranslate's /detect and source "auto": CLD2 (Debian's
// libcld2, Google's Compact Language Detector 2: n-gram tables for 83 languages, no model file).
#ifndef GLOSSA_SERVER_TEXT_LANGUAGE_DETECTOR_H_
#define GLOSSA_SERVER_TEXT_LANGUAGE_DETECTOR_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace glossa::server {

struct DetectedLanguage {
  std::string language;     // ISO 639-1 where there is one ("es"), as LibreTranslate's codes
  double confidence = 0.0;  // percent of the text's bytes in this language, 0..100
};

// The languages of `text` (valid UTF-8), most likely first, at most three; empty when CLD2
// cannot tell (too short, digits, an unknown language).
std::vector<DetectedLanguage> DetectLanguages(absl::string_view text);

// The language of `text` (valid UTF-8) among `candidates` (ISO 639-1 codes, as DetectLanguages
// names them): CLD2's most likely candidate; when none of its three guesses is one, the candidate
// CLD2 picks when told to expect it (its language hint; at most 8 candidates tried), the most
// confident if several. Between close languages (Spanish, Portuguese, Galician, Catalan, Italian,
// French, Romanian, Latin, English, German, Dutch) the text's function words ("y", "los" against
// "e", "os") overrule CLD2 when they clearly favour another candidate; the confidence is then the
// percent of the text's words that are its function words. INVALID_ARGUMENT naming the candidates
// when the text has fewer than kMinDetectLetters letters, is names only (two or more words, all
// capitalized, none a function word of a listed language: "Hasor, Rama, Gitthaim;"), or CLD2
// finds none of them.
constexpr int kMinDetectLetters = 5;
absl::StatusOr<DetectedLanguage> DetectAmong(absl::string_view text,
                                             const std::set<std::string>& candidates);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_TEXT_LANGUAGE_DETECTOR_H_
