// glossa-glossary-prepare-bench: what preparing a request (PrepareRequest: model lookup,
// tokenizing, the glossary's constraints) costs when it names a stored glossary of --entries
// entries, its terms compiled once and shared (GlossaryCache) or compiled for the request (a
// cache of its own per request: the stored entries copied as terms and every source term
// normalised, each time), against the same request without a glossary.
//   glossa-glossary-prepare-bench [--model FILE] [--entries 10000] [--repeats 200]
//
// The store is opened with its per-glossary limits raised to hold --entries entries (the server's
// 1 MiB limit holds about 2,000 short ones). Kinds alternate within each repeat; one JSON object
// on stdout: per kind, the median and mean microseconds per PrepareRequest; and the memory the
// stored glossary and its compiled form hold (glibc's bytes in use before and after each).
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench_util.h"
#include "nlohmann/json.hpp"
#include "server/glossaries/glossary_store.h"
#include "server/models/model_registry.h"
#include "server/request/glossary_cache.h"
#include "server/request/request.h"

ABSL_FLAG(std::string, model, GLOSSA_DEMO_MODEL, "model file");
ABSL_FLAG(int, entries, 10000, "entries of the stored glossary");
ABSL_FLAG(int, repeats, 200, "requests of each kind");

namespace glossa::server {
namespace {

int Fail(const absl::Status& status) {
  std::cerr << "glossa-glossary-prepare-bench: " << status << "\n";
  return 1;
}

// "luz" -> "light" and entries - 1 terms that occur in no text.
std::string GlossaryTsv(int entries) {
  std::string tsv = "luz\tlight\n";
  for (int i = 1; i < entries; ++i) {
    tsv += "t\xC3\xA9rmino" + std::to_string(i) + "\tterm" + std::to_string(i) + "\n";
  }
  return tsv;
}

// Bytes allocated and not freed (glibc).
int64_t InUse() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
}

v1::TranslateRequest Request(const std::string& text, const std::string& glossary_id) {
  v1::TranslateRequest request;
  request.add_texts(text);
  request.mutable_options()->set_beam_size(4);
  request.set_glossary_id(glossary_id);
  return request;
}

int Run() {
  EngineOptions options;
  options.workers = 0;  // nothing is translated: requests are only prepared
  auto registry = ModelRegistry::Load({"demo=" + absl::GetFlag(FLAGS_model)}, options);
  if (!registry.ok()) return Fail(registry.status());
  const int entries = absl::GetFlag(FLAGS_entries);
  GlossaryLimits limits;
  limits.max_entries = entries;
  limits.max_bytes = int64_t{1} << 30;
  limits.max_store_bytes = int64_t{1} << 30;
  auto store = GlossaryStore::Open("", limits);
  if (!store.ok()) return Fail(store.status());
  v1::CreateGlossaryRequest create;
  create.set_name("bench");
  create.set_source_language("es");
  create.set_target_language("en");
  create.set_entries_text(GlossaryTsv(entries));
  int64_t in_use = InUse();
  auto info = (*store)->Create(create);
  if (!info.ok()) return Fail(info.status());
  const int64_t stored_bytes = InUse() - in_use;
  GlossaryCache shared(store->get());
  in_use = InUse();
  auto compiled = shared.Compiled(*shared.Find(info->glossary_id()));
  if (!compiled.ok()) return Fail(compiled.status());
  const int64_t compiled_bytes = InUse() - in_use;
  const std::string no_term = "Y dijo Dios: Sea la tierra; y fue la tierra.";
  const std::string term = "Y vio Dios que la luz era buena.";
  const std::map<std::string, std::pair<v1::TranslateRequest, bool>> kinds = {
      {"no_glossary", {Request(no_term, ""), true}},
      {"no_term_cached", {Request(no_term, info->glossary_id()), true}},
      {"no_term_compiled_per_request", {Request(no_term, info->glossary_id()), false}},
      {"term_cached", {Request(term, info->glossary_id()), true}},
      {"term_compiled_per_request", {Request(term, info->glossary_id()), false}},
  };
  std::map<std::string, std::vector<double>> micros;
  const int repeats = absl::GetFlag(FLAGS_repeats);
  for (int r = -1; r < repeats; ++r) {  // r = -1: untimed warm-up
    for (const auto& [kind, how] : kinds) {
      const auto& [request, cached] = how;
      const auto start = std::chrono::steady_clock::now();
      GlossaryCache own(store->get());
      auto p = PrepareRequest(request, **registry, RequestLimits(), false, cached ? &shared : &own);
      const std::chrono::duration<double, std::micro> took =
          std::chrono::steady_clock::now() - start;
      if (!p.ok()) return Fail(p.status());
      if (r >= 0) micros[kind].push_back(took.count());
    }
  }
  nlohmann::json out = {{"entries", entries},
                        {"repeats", repeats},
                        {"compilations_of_the_shared_glossary", shared.compilations()},
                        {"glossary_held_bytes_as_counted",
                         GlossaryHeldBytes((*(*store)->Find(info->glossary_id()))->entries)},
                        {"stored_glossary_bytes_in_use", stored_bytes},
                        {"compiled_glossary_bytes_in_use", compiled_bytes},
                        {"cpu", bench::CpuModel()}};
  for (auto& [kind, values] : micros) {
    double sum = 0;
    for (double v : values) sum += v;
    out["kinds"][kind] = {{"median_us", bench::Round(bench::Percentile(values, 50), 1)},
                          {"mean_us", bench::Round(sum / values.size(), 1)}};
  }
  std::cout << out.dump(1) << "\n";
  return 0;
}

}  // namespace
}  // namespace glossa::server

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return glossa::server::Run();
}
