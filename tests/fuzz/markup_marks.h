// Shared by the HTML and XML fuzz targets: each run of a cut document "translated" as a mark
// and its placeholders in order, and what that mark must be written back as (the markup the
// placeholders stand for, in their place).
#ifndef GLOSSA_TESTS_FUZZ_MARKUP_MARKS_H_
#define GLOSSA_TESTS_FUZZ_MARKUP_MARKS_H_

#include <string>
#include <vector>

#include "fuzz_util.h"
#include "server/text/html_text.h"

namespace glossa::fuzz {

struct Marks {
  std::vector<std::string> marks;    // each run's "translation"
  std::vector<std::string> written;  // what each mark must be written as
};

inline Marks MarkRuns(const glossa::server::HtmlText& text) {
  Marks out;
  for (size_t i = 0; i < text.texts.size(); ++i) {
    const std::string& t = text.texts[i];
    std::string mark = "\x01", written = "\x01";
    for (size_t lt = t.find('<'); lt != std::string::npos; lt = t.find('<', lt + 1)) {
      const size_t gt = t.find('>', lt);
      FUZZ_CHECK(gt != std::string::npos, "an unclosed placeholder");
      const std::string tag = t.substr(lt, gt + 1 - lt);
      mark += tag;
      const bool close = tag[1] == '/';
      const size_t id = std::stoul(tag.substr(close ? 3 : 2));
      FUZZ_CHECK(id < text.markup[i].size(), "a placeholder without its markup");
      written += close ? text.markup[i][id].end : text.markup[i][id].start;
    }
    out.marks.push_back(mark);
    out.written.push_back(written);
  }
  return out;
}

}  // namespace glossa::fuzz

#endif  // GLOSSA_TESTS_FUZZ_MARKUP_MARKS_H_
