// A stored glossary's file: its JSON, and the POSIX calls that write it so that a crash leaves
// either the whole file or none (write a .tmp beside it, fsync, rename, fsync the directory).
#ifndef GLOSSA_SERVER_GLOSSARIES_GLOSSARY_FILE_H_
#define GLOSSA_SERVER_GLOSSARIES_GLOSSARY_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/glossaries/glossary_store.h"

namespace glossa::server {

// {"format": 1, "glossary_id": ..., "name": ..., "source_language": ..., "target_language": ...,
//  "creation_time": ..., "entries": [{"source": ..., "targets": [...]}, ...]}, one entry a line.
std::string GlossaryToJson(const Glossary& glossary);
// The glossary of such a text, its shape checked (not its content: see the store). The
// entry_count comes from the entries.
absl::StatusOr<Glossary> GlossaryFromJson(absl::string_view json);

// Writes dir/name whole: dir/name.tmp, fsync, rename over dir/name, fsync dir.
absl::Status WriteFileAtomically(const std::string& dir, const std::string& name,
                                 absl::string_view contents);
// Removes dir/name and fsyncs dir (a failed fsync is only written to stderr: the file is gone).
// OK when the file was already gone; an error means the file is still there.
absl::Status RemoveFileDurably(const std::string& dir, const std::string& name);
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_GLOSSARIES_GLOSSARY_FILE_H_
