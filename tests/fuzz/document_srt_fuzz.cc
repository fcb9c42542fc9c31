// Fuzzes ReadDocument and Write on SubRip subtitles (.srt) files (document_fuzz.h says what is
// checked).
#include "document_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return glossa::fuzz::FuzzDocument("input.srt", data, size);
}
