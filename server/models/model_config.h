// What a server serves: one ModelSpec per model name, from --model NAME=PATH flags or from a
// --model_config file (re-read while the server runs, see LiveModels in server/live/live_models.h).
//
// The file is text or JSON (JSON when its first non-blank character is '{'):
//
//   # text: one model a line, NAME=PATH then optional KEY=VALUE options; '#' starts a comment
//   es-en=models/opus-mt-es-en-bible.glossa
//   es-en-int8=models/opus-mt-es-en-bible.glossa compute_type=int8 workers=1
//
//   {"models": {"es-en": "models/opus-mt-es-en-bible.glossa",
//               "es-en-int8": {"path": "models/opus-mt-es-en-bible.glossa",
//                              "compute_type": "int8", "workers": 1}}}
//
// (or "models": [{"name": ..., "path": ..., options}, ...]). The options, each defaulting to its
// command-line flag: compute_type, float32_output_layer, workers, threads, max_active_sequences,
// kv_cache_mb; and priority (default 0), which orders the models that cover a request's languages
// when it names no model (higher first). A relative PATH is relative to the config file's directory.
#ifndef GLOSSA_SERVER_MODELS_MODEL_CONFIG_H_
#define GLOSSA_SERVER_MODELS_MODEL_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/engine.h"
#include "engine/model.h"

namespace glossa::server {

// One model to serve, with its options resolved (the flags' values where the config is silent).
struct ModelSpec {
  std::string name;
  std::string path;
  ModelOptions model_options;
  EngineOptions engine_options;
  int priority = 0;  // routing order among models that cover the same pair, higher first
  // Catalogued (--models_dir, `dir=`): loaded by its first request rather than at once.
  bool on_demand = false;
};

// The command-line values that config entries start from.
struct ModelDefaults {
  ModelOptions model_options;
  EngineOptions engine_options;  // workers already resolved (> 0)
};

// True when two specs load the same thing the same way (the name aside): same path, same
// model options, same per-model engine options, same priority (a model whose priority changes is
// reloaded like any changed entry: the registry's models are immutable once loaded).
bool SameLoad(const ModelSpec& a, const ModelSpec& b);

// "NAME=PATH" (or a bare PATH, named after the file without ".glossa"), as --model takes it.
absl::StatusOr<ModelSpec> ParseModelFlag(absl::string_view spec, const ModelDefaults& defaults);

// A whole config file's text. Relative paths are taken relative to base_dir (empty: as they
// are). Fails, naming the line or entry, on a syntax error, an unknown option, a bad value, a
// repeated name, or a file that lists no model.
absl::StatusOr<std::vector<ModelSpec>> ParseModelConfig(absl::string_view text,
                                                        const ModelDefaults& defaults,
                                                        const std::string& base_dir = "");

// Reads and parses the file at `path` (relative model paths: relative to its directory).
absl::StatusOr<std::vector<ModelSpec>> ReadModelConfig(const std::string& path,
                                                       const ModelDefaults& defaults);

// Every "*.glossa" file of `dir` (not its subfolders), named after the file without ".glossa"
// and sorted by name, each with `options`' options and on_demand set. NOT_FOUND when `dir`
// cannot be read.
absl::StatusOr<std::vector<ModelSpec>> ScanModelsDir(const std::string& dir,
                                                     const ModelSpec& options);

// A whole --model_config: its models (those of its `dir=` lines included: a model listed by
// name wins over a file of the same name in a folder) and its memory budget, when it sets one:
//
//   dir=/srv/models compute_type=int8   # every *.glossa there, loaded on its first request
//   max_loaded_mb=4000                  # unload least recently used models to stay under it
//
// (JSON: "dirs": ["PATH" or {"path": ..., options}], "max_loaded_mb": N.)
struct ServedModels {
  std::vector<ModelSpec> specs;
  int64_t max_loaded_mb = -1;  // -1: not set (the --max_loaded_mb flag applies); 0: no limit
  bool demo = false;  // the bundled demo model, served because no model was named
};
absl::StatusOr<ServedModels> ParseServedModels(absl::string_view text,
                                               const ModelDefaults& defaults,
                                               const std::string& base_dir = "");
absl::StatusOr<ServedModels> ReadServedModels(const std::string& path,
                                              const ModelDefaults& defaults);

// How the models of a new config differ from those served now: names to remove, names to add,
// and names whose spec changed (path or options). Each list is sorted.
struct ModelConfigDiff {
  std::vector<std::string> removed, added, changed;
};
ModelConfigDiff DiffModelSpecs(const std::vector<ModelSpec>& current,
                               const std::vector<ModelSpec>& next);

// The identity of a file on disk (device, inode, size, modification time), to notice a model
// file replaced under the same path. exists == false when stat fails.
struct FileStamp {
  bool exists = false;
  uint64_t device = 0, inode = 0, size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileStamp& o) const {
    return exists == o.exists && device == o.device && inode == o.inode && size == o.size &&
           mtime_ns == o.mtime_ns;
  }
  bool operator!=(const FileStamp& o) const { return !(*this == o); }
};
FileStamp StampFile(const std::string& path);

// --help text of --model_config.
extern const char kModelConfigFlagHelp[];

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_MODELS_MODEL_CONFIG_H_
