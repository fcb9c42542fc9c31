#include "server/models/model_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "server/common/status_util.h"

namespace glossa::server {

const char kModelConfigFlagHelp[] =
    "File listing the models to serve, re-read on SIGHUP and when it (or a model file it names) "
    "changes: added names load in the background (their health NOT_SERVING until ready), removed "
    "ones finish their in-flight requests while new ones get NOT_FOUND, a changed entry is "
    "swapped in once its new model has loaded, and one that fails to load leaves the old model "
    "serving (logged, glossa_model_load_failures_total). Text, one model a line: 'NAME=PATH "
    "[compute_type=..] [float32_output_layer=true|false] [argmax_screen=true|false] [workers=N] "
    "[threads=N] "
    "[max_active_sequences=N] [kv_cache_mb=N] [priority=N]' ('#' comments; priority: which model "
    "a request that names none is routed to when several cover its languages, higher first), or JSON: {\"models\": {\"NAME\": "
    "\"PATH\" or {\"path\": \"PATH\", options}}}. Options default to their flags; relative paths "
    "are relative to the file. A line 'dir=PATH [options]' catalogues every *.glossa file in "
    "PATH under its file name, loaded by its first request; 'max_loaded_mb=N' sets the memory "
    "budget (as --max_loaded_mb). Not with --model";

namespace {

int AutoWorkers() {
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 8);
}

ModelSpec FromDefaults(const ModelDefaults& defaults) {
  ModelSpec spec;
  spec.model_options = defaults.model_options;
  spec.engine_options = defaults.engine_options;
  return spec;
}

absl::StatusOr<int64_t> ParseInt(absl::string_view key, absl::string_view value, int64_t min,
                                 int64_t max) {
  int64_t n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < min || n > max) {
    return absl::InvalidArgumentError(absl::StrCat(key, "=", QuoteForMessage(value),
                                                   ": expected a whole number from ", min, " to ",
                                                   max));
  }
  return n;
}

absl::Status ParseBool(absl::string_view key, absl::string_view value, bool* out) {
  if (!absl::SimpleAtob(value, out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, "=", QuoteForMessage(value), ": expected true or false"));
  }
  return absl::OkStatus();
}

absl::Status SetOption(absl::string_view key, absl::string_view value, ModelSpec* spec) {
  if (key == "compute_type") {
    spec->model_options.compute_type = std::string(value);
  } else if (key == "float32_output_layer") {
    return ParseBool(key, value, &spec->model_options.float32_output_layer);
  } else if (key == "argmax_screen") {
    return ParseBool(key, value, &spec->model_options.argmax_screen);
  } else if (key == "workers") {
    auto n = ParseInt(key, value, 0, 256);
    if (!n.ok()) return n.status();
    spec->engine_options.workers = *n == 0 ? AutoWorkers() : static_cast<int>(*n);
  } else if (key == "threads") {
    auto n = ParseInt(key, value, 1, 1024);
    if (!n.ok()) return n.status();
    spec->engine_options.threads_per_worker = static_cast<int>(*n);
  } else if (key == "max_active_sequences") {
    auto n = ParseInt(key, value, 1, 1 << 16);
    if (!n.ok()) return n.status();
    spec->engine_options.max_active_sequences = static_cast<int>(*n);
    spec->engine_options.max_active_rows = static_cast<int>(*n) * 4;
  } else if (key == "kv_cache_mb") {
    auto n = ParseInt(key, value, 1, int64_t{1} << 30);
    if (!n.ok()) return n.status();
    spec->engine_options.kv_cache_bytes = *n << 20;
  } else if (key == "priority") {
    auto n = ParseInt(key, value, -1000000, 1000000);
    if (!n.ok()) return n.status();
    spec->priority = static_cast<int>(*n);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown option ", QuoteForMessage(key),
        ": the options are compute_type, float32_output_layer, argmax_screen, workers, threads, "
        "max_active_sequences, kv_cache_mb, priority"));
  }
  return absl::OkStatus();
}

std::string Resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return base_dir + "/" + path;
}

absl::Status CheckName(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("a model name is empty");
  for (unsigned char c : name) {
    if (c <= 0x20 || c == 0x7F || c == '=' || c == '#') {
      return absl::InvalidArgumentError(absl::StrCat(
          "model name ", QuoteForMessage(name),
          " holds a space, control character, '=' or '#'"));
    }
  }
  return absl::OkStatus();
}

// Options KEY=VALUE after a line's first word.
absl::Status SetOptions(const std::vector<absl::string_view>& words, ModelSpec* spec) {
  for (size_t i = 1; i < words.size(); ++i) {
    const size_t e = words[i].find('=');
    if (e == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(QuoteForMessage(words[i]), ": expected KEY=VALUE"));
    }
    if (absl::Status s = SetOption(words[i].substr(0, e), words[i].substr(e + 1), spec); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// A `dir=PATH [options]` line's models, appended to `dirs`.
absl::Status AddDir(const std::string& dir, const ModelSpec& options,
                    std::vector<ModelSpec>* dirs) {
  auto found = ScanModelsDir(dir, options);
  if (!found.ok()) return found.status();
  dirs->insert(dirs->end(), found->begin(), found->end());
  return absl::OkStatus();
}

absl::StatusOr<ServedModels> ParseText(absl::string_view text, const ModelDefaults& defaults,
                                       const std::string& base_dir,
                                       std::vector<ModelSpec>* dirs) {
  ServedModels served;
  std::vector<ModelSpec>& specs = served.specs;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) {
      line = line.substr(0, hash);
    }
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (words.empty()) continue;
    auto fail = [&](const absl::Status& s) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_number, ": ", s.message()));
    };
    const size_t eq = words[0].find('=');
    if (eq == absl::string_view::npos || eq == 0 || eq + 1 == words[0].size()) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat(QuoteForMessage(words[0]), ": expected NAME=PATH")));
    }
    ModelSpec spec = FromDefaults(defaults);
    spec.name = std::string(words[0].substr(0, eq));
    const std::string value(words[0].substr(eq + 1));
    if (absl::Status s = SetOptions(words, &spec); !s.ok()) return fail(s);
    if (spec.name == "max_loaded_mb") {
      auto n = ParseInt(spec.name, value, 0, int64_t{1} << 40);
      if (!n.ok()) return fail(n.status());
      if (words.size() > 1) return fail(absl::InvalidArgumentError("max_loaded_mb takes no options"));
      served.max_loaded_mb = *n;
      continue;
    }
    if (spec.name == "dir") {
      if (absl::Status s = AddDir(Resolve(value, base_dir), spec, dirs); !s.ok()) return fail(s);
      continue;
    }
    spec.path = Resolve(value, base_dir);
    if (absl::Status s = CheckName(spec.name); !s.ok()) return fail(s);
    specs.push_back(std::move(spec));
  }
  return served;
}

absl::StatusOr<std::string> JsonOptionValue(const std::string& key, const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return std::string(v.get<bool>() ? "true" : "false");
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  return absl::InvalidArgumentError(
      absl::StrCat(QuoteForMessage(key), ": expected a string, a whole number or a boolean"));
}

absl::StatusOr<ModelSpec> ParseJsonEntry(const std::string& name, const nlohmann::json& entry,
                                         const ModelDefaults& defaults,
                                         const std::string& base_dir) {
  auto fail = [&](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat("model ", QuoteForMessage(name), ": ", message));
  };
  ModelSpec spec = FromDefaults(defaults);
  spec.name = name;
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  if (entry.is_string()) {
    spec.path = Resolve(entry.get<std::string>(), base_dir);
  } else if (entry.is_object()) {
    for (const auto& [key, value] : entry.items()) {
      if (key == "name") continue;
      if (key == "path") {
        if (!value.is_string()) return fail("\"path\" must be a string");
        spec.path = Resolve(value.get<std::string>(), base_dir);
        continue;
      }
      auto text = JsonOptionValue(key, value);
      if (!text.ok()) return fail(text.status().message());
      if (absl::Status s = SetOption(key, *text, &spec); !s.ok()) return fail(s.message());
    }
  } else {
    return fail("expected \"PATH\" or an object with \"path\" and options");
  }
  if (spec.path.empty()) return fail("no \"path\"");
  return spec;
}

absl::StatusOr<std::vector<ModelSpec>> ParseJsonModels(const nlohmann::json& models,
                                                       const ModelDefaults& defaults,
                                                       const std::string& base_dir) {
  std::vector<ModelSpec> specs;
  if (models.is_object()) {
    for (const auto& [name, entry] : models.items()) {
      auto spec = ParseJsonEntry(name, entry, defaults, base_dir);
      if (!spec.ok()) return spec.status();
      specs.push_back(*std::move(spec));
    }
  } else if (models.is_array()) {
    for (size_t i = 0; i < models.size(); ++i) {
      const nlohmann::json& entry = models[i];
      if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("models[", i, "]: expected an object with \"name\" and \"path\""));
      }
      auto spec = ParseJsonEntry(entry["name"].get<std::string>(), entry, defaults, base_dir);
      if (!spec.ok()) return spec.status();
      specs.push_back(*std::move(spec));
    }
  } else {
    return absl::InvalidArgumentError("\"models\" must be an object (NAME: PATH) or an array");
  }
  return specs;
}

// "dirs": ["PATH" or {"path": "PATH", options}, ...]
absl::Status ParseJsonDirs(const nlohmann::json& dirs, const ModelDefaults& defaults,
                           const std::string& base_dir, std::vector<ModelSpec>* out) {
  if (!dirs.is_array()) return absl::InvalidArgumentError("\"dirs\" must be an array");
  for (size_t i = 0; i < dirs.size(); ++i) {
    auto spec = ParseJsonEntry("dir", dirs[i], defaults, base_dir);
    if (!spec.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("dirs[", i, "]: ", spec.status().message()));
    }
    if (absl::Status s = AddDir(spec->path, *spec, out); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<ServedModels> ParseJson(absl::string_view text, const ModelDefaults& defaults,
                                       const std::string& base_dir, std::vector<ModelSpec>* dirs) {
  nlohmann::json doc = nlohmann::json::parse(text.begin(), text.end(), nullptr,
                                             /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  if (!doc.is_object() || (!doc.contains("models") && !doc.contains("dirs"))) {
    return absl::InvalidArgumentError("expected a JSON object with \"models\" or \"dirs\"");
  }
  ServedModels served;
  for (const auto& [key, value] : doc.items()) {
    if (key == "models") {
      auto specs = ParseJsonModels(value, defaults, base_dir);
      if (!specs.ok()) return specs.status();
      served.specs = *std::move(specs);
    } else if (key == "dirs") {
      if (absl::Status s = ParseJsonDirs(value, defaults, base_dir, dirs); !s.ok()) return s;
    } else if (key == "max_loaded_mb" && value.is_number_unsigned()) {
      served.max_loaded_mb = value.get<int64_t>();
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown key ", QuoteForMessage(key),
          ": the file holds \"models\", \"dirs\" and \"max_loaded_mb\" (a whole number)"));
    }
  }
  return served;
}

}  // namespace

bool SameLoad(const ModelSpec& a, const ModelSpec& b) {
  const EngineOptions &x = a.engine_options, &y = b.engine_options;
  return a.path == b.path && a.model_options.compute_type == b.model_options.compute_type &&
         a.model_options.float32_output_layer == b.model_options.float32_output_layer &&
         a.model_options.argmax_screen == b.model_options.argmax_screen && x.workers == y.workers &&
         x.threads_per_worker == y.threads_per_worker &&
         x.max_active_sequences == y.max_active_sequences &&
         x.max_active_rows == y.max_active_rows && x.kv_cache_bytes == y.kv_cache_bytes &&
         a.priority == b.priority;
}

absl::StatusOr<ModelSpec> ParseModelFlag(absl::string_view text, const ModelDefaults& defaults) {
  ModelSpec spec = FromDefaults(defaults);
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos) {
    spec.path = std::string(text);
    spec.name = spec.path.substr(spec.path.rfind('/') + 1);
    if (spec.name.size() > 7 && spec.name.substr(spec.name.size() - 7) == ".glossa") {
      spec.name.resize(spec.name.size() - 7);
    }
  } else {
    spec.name = std::string(text.substr(0, eq));
    spec.path = std::string(text.substr(eq + 1));
  }
  if (spec.name.empty() || spec.path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model '", text, "': expected NAME=PATH with both parts"));
  }
  return spec;
}

absl::StatusOr<ServedModels> ParseServedModels(absl::string_view text,
                                               const ModelDefaults& defaults,
                                               const std::string& base_dir) {
  const absl::string_view stripped = absl::StripLeadingAsciiWhitespace(text);
  std::vector<ModelSpec> dirs;
  auto served = !stripped.empty() && stripped.front() == '{'
                    ? ParseJson(text, defaults, base_dir, &dirs)
                    : ParseText(text, defaults, base_dir, &dirs);
  if (!served.ok()) return served.status();
  std::set<std::string> names;
  for (const ModelSpec& spec : served->specs) {
    if (!names.insert(spec.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("the model name ", QuoteForMessage(spec.name), " is listed twice"));
    }
  }
  for (ModelSpec& spec : dirs) {  // a name listed already wins
    if (names.insert(spec.name).second) served->specs.push_back(std::move(spec));
  }
  if (served->specs.empty()) {
    return absl::InvalidArgumentError(
        "the file lists no model (a server needs at least one; to stop serving, stop the "
        "server)");
  }
  return served;
}

absl::StatusOr<std::vector<ModelSpec>> ParseModelConfig(absl::string_view text,
                                                        const ModelDefaults& defaults,
                                                        const std::string& base_dir) {
  auto served = ParseServedModels(text, defaults, base_dir);
  if (!served.ok()) return served.status();
  return std::move(served->specs);
}

absl::StatusOr<ServedModels> ReadServedModels(const std::string& path,
                                              const ModelDefaults& defaults) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::ostringstream data;
  data << in.rdbuf();
  const size_t slash = path.rfind('/');
  const std::string base_dir = slash == std::string::npos ? "" : path.substr(0, slash);
  auto served = ParseServedModels(data.str(), defaults, base_dir);
  if (!served.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", served.status().message()));
  }
  return served;
}

absl::StatusOr<std::vector<ModelSpec>> ReadModelConfig(const std::string& path,
                                                       const ModelDefaults& defaults) {
  auto served = ReadServedModels(path, defaults);
  if (!served.ok()) return served.status();
  return std::move(served->specs);
}

absl::StatusOr<std::vector<ModelSpec>> ScanModelsDir(const std::string& dir,
                                                     const ModelSpec& options) {
  std::error_code error;
  std::vector<ModelSpec> specs;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string file = entry.path().filename().string();
    if (file.size() <= 7 || file.compare(file.size() - 7, 7, ".glossa") != 0) continue;
    if (!entry.is_regular_file(error)) continue;
    ModelSpec spec = options;
    spec.name = file.substr(0, file.size() - 7);
    spec.path = entry.path().string();
    spec.on_demand = true;
    if (CheckName(spec.name).ok()) specs.push_back(std::move(spec));
  }
  if (error) {
    return absl::NotFoundError(
        absl::StrCat("cannot read the models folder ", QuoteForMessage(dir), ": ",
                     error.message()));
  }
  std::sort(specs.begin(), specs.end(),
            [](const ModelSpec& a, const ModelSpec& b) { return a.name < b.name; });
  return specs;
}

ModelConfigDiff DiffModelSpecs(const std::vector<ModelSpec>& current,
                               const std::vector<ModelSpec>& next) {
  std::map<std::string, const ModelSpec*> now, then;
  for (const ModelSpec& s : current) now[s.name] = &s;
  for (const ModelSpec& s : next) then[s.name] = &s;
  ModelConfigDiff diff;
  for (const auto& [name, spec] : now) {
    if (!then.count(name)) diff.removed.push_back(name);
  }
  for (const auto& [name, spec] : then) {
    auto it = now.find(name);
    if (it == now.end()) {
      diff.added.push_back(name);
    } else if (!SameLoad(*it->second, *spec)) {
      diff.changed.push_back(name);
    }
  }
  return diff;
}

FileStamp StampFile(const std::string& path) {
  FileStamp stamp;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return stamp;
  stamp.exists = true;
  stamp.device = static_cast<uint64_t>(st.st_dev);
  stamp.inode = static_cast<uint64_t>(st.st_ino);
  stamp.size = static_cast<uint64_t>(st.st_size);
  stamp.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return stamp;
}

}  // namespace glossa::server
