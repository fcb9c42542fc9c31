// Language identification for LibreTranslate's /detect and source "auto": CLD2 (Debian's
// libcld2, Google's Compact Language Detector 2: n-gram tables for 83 languages, no model file).
#ifndef GLOSSA_SERVER_TEXT_LANGUAGE_DETECTOR_H_
#define GLOSSA_SERVER_TEXT_LANGUAGE_DETECTOR_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace glossa::server {

struct DetectedLanguage {
  std::string language;     // ISO 639-1 where there is one ("es"), as LibreTranslate's codes
  double confidence = 0.0;  // percent of the text's bytes in this language, 0..100
};

// The languages of `text` (valid UTF-8), most likely first, at most three; empty when CLD2
// cannot tell (too short, digits, an unknown language).
std::vector<DetectedLanguage> DetectLanguages(absl::string_view text);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_TEXT_LANGUAGE_DETECTOR_H_
