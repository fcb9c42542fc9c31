// The page served at GET / by the HTTP API: one static HTML file with its script and style
// inline (no build step, nothing fetched from elsewhere). It lists the language pairs from
// /languages and translates through LibreTranslate's POST /translate as the person types.
#ifndef GLOSSA_SERVER_HTTP_API_WEB_PAGE_H_
#define GLOSSA_SERVER_HTTP_API_WEB_PAGE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace glossa::server {

// The page. With an `about` text, it shows that text above the form and each of `examples` as a
// button that translates it (the bundled demo model says what it is and what it translates well).
std::string WebPage(absl::string_view about, const std::vector<std::string>& examples);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_HTTP_API_WEB_PAGE_H_
