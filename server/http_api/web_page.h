// The page served at GET / by the HTTP API: one static HTML file with its script and style
// inline (no build step, nothing fetched from elsewhere). It lists the language pairs from
// /languages and translates through LibreTranslate's POST /translate as the person types.
#ifndef GLOSSA_SERVER_HTTP_API_WEB_PAGE_H_
#define GLOSSA_SERVER_HTTP_API_WEB_PAGE_H_

#include "absl/strings/string_view.h"

namespace glossa::server {

extern const absl::string_view kWebPage;

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_HTTP_API_WEB_PAGE_H_
