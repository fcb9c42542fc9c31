// Fuzzes the multipart/form-data parser of POST /translate_file: the input's first line is the
// Content-Type, the rest the body. It must never crash or read outside the body; what it
// returns must be parts that lie inside the body, each with a name, at most the parts allowed.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/file_api/multipart.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string content_type =
      newline == std::string::npos ? input : input.substr(0, newline);
  const std::string body = newline == std::string::npos ? "" : input.substr(newline + 1);
  constexpr int kMaxParts = 8;
  auto parts = glossa::server::ParseMultipart(content_type, body, kMaxParts);
  if (!parts.ok()) return 0;
  if (static_cast<int>(parts->size()) > kMaxParts) std::abort();
  for (const glossa::server::FormPart& part : *parts) {
    if (part.name.empty()) std::abort();
    if (part.data.data() < body.data() ||
        part.data.data() + part.data.size() > body.data() + body.size()) {
      std::abort();
    }
  }
  return 0;
}
