// Shared by the fuzz targets: an always-on check (a finding, in libFuzzer's terms) and a reference
// UTF-8 validator written from the Unicode standard's table of well-formed byte sequences, to
// compare our validators against.
#ifndef GLOSSA_TESTS_FUZZ_FUZZ_UTIL_H_
#define GLOSSA_TESTS_FUZZ_FUZZ_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/string_view.h"

// Unlike assert(), active in Release builds too.
#define FUZZ_CHECK(cond, what)                                                                     \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: %s\n", __FILE__, __LINE__, #cond, what); \
      std::abort();                                                                                \
    }                                                                                              \
  } while (0)

namespace glossa::fuzz {

// Unicode 15, table 3-7 (well-formed UTF-8 byte sequences).
inline bool ReferenceUtf8Valid(absl::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  auto in = [](unsigned char c, unsigned char lo, unsigned char hi) { return c >= lo && c <= hi; };
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    const size_t left = n - i;
    if (c <= 0x7F) {
      i += 1;
    } else if (in(c, 0xC2, 0xDF)) {
      if (left < 2 || !in(s[i + 1], 0x80, 0xBF)) return false;
      i += 2;
    } else if (in(c, 0xE0, 0xEF)) {
      const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
      if (left < 3 || !in(s[i + 1], lo, hi) || !in(s[i + 2], 0x80, 0xBF)) return false;
      i += 3;
    } else if (in(c, 0xF0, 0xF4)) {
      const unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
      if (left < 4 || !in(s[i + 1], lo, hi) || !in(s[i + 2], 0x80, 0xBF) ||
          !in(s[i + 3], 0x80, 0xBF)) {
        return false;
      }
      i += 4;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace glossa::fuzz

#endif  // GLOSSA_TESTS_FUZZ_FUZZ_UTIL_H_
