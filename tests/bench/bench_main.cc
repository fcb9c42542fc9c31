// glossa-bench: translation throughput and latency of the in-process engine, as one JSON object.
//   glossa-bench [--model FILE] [--input FILE] [--beam_sizes 1,4] [--batch_sizes 1,32] [--threads
//   1]
// Every (threads, beam size, batch size) combination translates the whole input; progress lines go
// to stderr, the JSON to stdout. No figure is checked here: compare them across runs and machines.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "util/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench_util.h"
#include "engine/translator.h"
#include "nlohmann/json.hpp"
#include "oneapi/dnnl/dnnl.h"
#include "util/threads.h"

ABSL_FLAG(std::string, model, GLOSSA_DEMO_MODEL, "Glossa model file (made by glossa-convert)");
ABSL_FLAG(std::string, input, GLOSSA_SHARED_DIR "/golden/dev.es",
          "Source sentences, one per line (default: the shared dev set)");
ABSL_FLAG(int, limit, 0, "Use only the first N input lines; 0 = all");
ABSL_FLAG(std::string, beam_sizes, "1,4", "Comma-separated beam sizes to run (1 = greedy)");
ABSL_FLAG(std::string, batch_sizes, "1,32",
          "Comma-separated batch sizes: batch B translates chunks of B consecutive sentences per "
          "Translate call (TranslatorOptions.max_batch_size = B)");
ABSL_FLAG(std::string, threads, "1", "Comma-separated compute thread counts (OpenMP team size)");
ABSL_FLAG(int, max_output_tokens, 256,
          "Most tokens generated per sentence, end-of-sentence "
          "included (as Hugging Face's max_new_tokens)");
ABSL_FLAG(std::string, compute_types, "",
          "Comma-separated compute types to run (float32, bfloat16, int8, int8_fast); the model "
          "is loaded once per type. Empty: as the model file stores its weights");
ABSL_FLAG(bool, float32_output_layer, false,
          "Keep the output projection in float32 for bfloat16 and int8");
ABSL_FLAG(bool, argmax_screen, true, glossa::kArgmaxScreenFlagHelp);
ABSL_FLAG(bool, scores, false,
          "Compute greedy scores (glossa-server computes them only when a request asks); "
          "without them greedy steps may use --argmax_screen");
ABSL_FLAG(int, repeat, 1,
          "Timed runs per configuration; the run with the median total time is "
          "reported (the lower middle one for an even count)");
ABSL_FLAG(std::string, controls, "none",
          "Comma-separated decoding controls to run, each alone: none, repetition_penalty (1.3), "
          "no_repeat_ngram_size (3), min_output_tokens (20), target_prefix ('And'), token_scores, "
          "or all (every one at once)");
ABSL_FLAG(bool, warmup, true, "Translate a few sentences untimed before each configuration");
ABSL_FLAG(std::string, source_language, "",
          "Source language (multilingual models need both; see glossa-translate --help)");
ABSL_FLAG(std::string, target_language, "", "Target language");

namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr double kFlopPerTargetToken = 13.4e6;
constexpr double kFlopPerSourceToken = 5.5e6;
constexpr int kWarmupSentences = 8;

struct Config {
  std::string compute_type;
  int threads = 1;
  int beam_size = 1;
  int batch_size = 1;
  std::string controls = "none";
};

// Sets the decoding control named `name` (see --controls) in `options`.
absl::Status ApplyControls(const std::string& name, glossa::TranslateOptions& options) {
  const bool all = name == "all";
  bool known = all || name == "none";
  auto wants = [&](const char* control) {
    known = known || name == control;
    return all || name == control;
  };
  if (wants("repetition_penalty")) options.repetition_penalty = 1.3f;
  if (wants("no_repeat_ngram_size")) options.no_repeat_ngram_size = 3;
  if (wants("min_output_tokens")) options.min_output_tokens = 20;
  if (wants("target_prefix")) options.target_prefix = "And";
  if (wants("token_scores")) options.token_scores = true;
  if (!known) return absl::InvalidArgumentError(absl::StrCat("--controls: unknown '", name, "'"));
  return absl::OkStatus();
}

struct Timing {
  double seconds = 0.0;
  int64_t target_tokens = 0;
  int length_limited = 0;          // best hypotheses that did not end with EOS
  std::vector<double> latency_ms;  // per sentence: the time of the call that translated it
};

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

std::vector<std::vector<std::string>> Chunks(const std::vector<std::string>& lines, size_t size) {
  std::vector<std::vector<std::string>> chunks;
  for (size_t first = 0; first < lines.size(); first += size) {
    const size_t last = std::min(lines.size(), first + size);
    chunks.emplace_back(lines.begin() + first, lines.begin() + last);
  }
  return chunks;
}

// Adds the best hypothesis of each translation to `timing`, EOS not counted.
void CountTargets(const std::vector<glossa::Translation>& results, int eos_id, double ms,
                  Timing& timing) {
  for (const glossa::Translation& t : results) {
    static const std::vector<int> kNone;
    const std::vector<int>& ids = t.hypotheses.empty() ? kNone : t.hypotheses[0].token_ids;
    const bool ends_with_eos = !ids.empty() && ids.back() == eos_id;
    timing.target_tokens += static_cast<int64_t>(ids.size()) - (ends_with_eos ? 1 : 0);
    timing.length_limited += ends_with_eos ? 0 : 1;
    timing.latency_ms.push_back(ms);
  }
}

absl::StatusOr<Timing> TimeRun(const glossa::Translator& translator,
                               const std::vector<std::vector<std::string>>& chunks,
                               const glossa::TranslateOptions& options) {
  Timing timing;
  const int eos_id = translator.model().config().eos_id;
  const Clock::time_point start = Clock::now();
  for (const std::vector<std::string>& chunk : chunks) {
    const Clock::time_point t0 = Clock::now();
    auto results = translator.Translate(chunk, options);
    const double ms = Ms(Clock::now() - t0);
    if (!results.ok()) return results.status();
    CountTargets(*results, eos_id, ms, timing);
  }
  timing.seconds = Ms(Clock::now() - start) / 1000.0;
  return timing;
}

// Runs `repeat` times and returns the run with the median total time.
absl::StatusOr<Timing> MedianRun(const glossa::Translator& translator,
                                 const std::vector<std::vector<std::string>>& chunks,
                                 const glossa::TranslateOptions& options, int repeat) {
  std::vector<Timing> runs;
  for (int i = 0; i < std::max(1, repeat); ++i) {
    absl::StatusOr<Timing> run = TimeRun(translator, chunks, options);
    if (!run.ok()) return run.status();
    runs.push_back(*std::move(run));
  }
  std::sort(runs.begin(), runs.end(),
            [](const Timing& a, const Timing& b) { return a.seconds < b.seconds; });
  return runs[(runs.size() - 1) / 2];
}

Json LatencyJson(const std::vector<double>& ms) {
  using glossa::bench::Percentile;
  using glossa::bench::Round;
  double sum = 0.0;
  for (double x : ms) sum += x;
  return Json{{"p50", Round(Percentile(ms, 50), 3)},
              {"p90", Round(Percentile(ms, 90), 3)},
              {"p99", Round(Percentile(ms, 99), 3)},
              {"max", Round(ms.empty() ? 0.0 : *std::max_element(ms.begin(), ms.end()), 3)},
              {"mean", Round(ms.empty() ? 0.0 : sum / ms.size(), 3)}};
}

// The GEMM peak of a compute type relative to fp32 FMA (the roofline: int8 x4; bf16 x2).
// The model's FLOPs are counted once for int8 too, although its matmuls run twice the rows.
double PeakFactor(const std::string& compute_type) {
  if (compute_type == "int8" || compute_type == "int8_fast") return 4.0;
  return compute_type == "bfloat16" ? 2.0 : 1.0;
}

Json RunJson(const Config& config, const Timing& timing, int64_t source_tokens,
             double fma_peak) {
  using glossa::bench::Round;
  const size_t sentences = timing.latency_ms.size();
  const double tok_s = timing.seconds > 0 ? timing.target_tokens / timing.seconds : 0.0;
  const double src_per_tgt =
      timing.target_tokens > 0 ? static_cast<double>(source_tokens) / timing.target_tokens : 0.0;
  const double flop_per_token = kFlopPerTargetToken + kFlopPerSourceToken * src_per_tgt;
  return Json{
      {"compute_type", config.compute_type},
      {"threads", config.threads},
      {"beam_size", config.beam_size},
      {"batch_size", config.batch_size},
      {"controls", config.controls},
      {"sentences", sentences},
      {"target_tokens", timing.target_tokens},
      {"source_tokens", source_tokens},
      {"length_limited", timing.length_limited},
      {"seconds", Round(timing.seconds, 4)},
      {"target_tokens_per_s", Round(tok_s, 2)},
      {"sentences_per_s", Round(timing.seconds > 0 ? sentences / timing.seconds : 0.0, 3)},
      {"latency_ms", LatencyJson(timing.latency_ms)},
      {"peak_rss_mb", Round(glossa::bench::ProcStatusMb("VmHWM"), 1)},
      {"rss_mb", Round(glossa::bench::ProcStatusMb("VmRSS"), 1)},
      {"fma_peak_gflops_per_thread", Round(fma_peak * 1e-9, 1)},
      {"gemm_roofline_share",
       fma_peak > 0 ? Json(Round(tok_s * flop_per_token /
                                     (fma_peak * PeakFactor(config.compute_type) * config.threads),
                                 5))
                    : Json(nullptr)},
      {"load_average_1m", glossa::bench::LoadAverage()},
  };
}

absl::StatusOr<Json> RunConfig(std::shared_ptr<const glossa::Model> model,
                               const std::vector<std::string>& sentences, const Config& config,
                               int64_t source_tokens) {
  glossa::SetComputeThreads(config.threads);
  glossa::TranslatorOptions translator_options;
  translator_options.max_batch_size = config.batch_size;
  translator_options.threads = config.threads;
  translator_options.max_beam_size = std::max(translator_options.max_beam_size, config.beam_size);
  glossa::Translator translator(std::move(model), translator_options);
  glossa::TranslateOptions options;
  options.beam_size = config.beam_size;
  options.max_output_tokens = absl::GetFlag(FLAGS_max_output_tokens);
  options.scores = absl::GetFlag(FLAGS_scores);
  options.source_language = absl::GetFlag(FLAGS_source_language);
  options.target_language = absl::GetFlag(FLAGS_target_language);
  if (absl::Status s = ApplyControls(config.controls, options); !s.ok()) return s;
  if (auto resolved = translator.Resolve(options); !resolved.ok()) return resolved.status();

  const auto chunks = Chunks(sentences, static_cast<size_t>(config.batch_size));
  if (absl::GetFlag(FLAGS_warmup)) {
    const size_t n = std::min(sentences.size(),
                              static_cast<size_t>(std::max(kWarmupSentences, config.batch_size)));
    const std::vector<std::string> head(sentences.begin(), sentences.begin() + n);
    auto warm = TimeRun(translator, Chunks(head, config.batch_size), options);
    if (!warm.ok()) return warm.status();
  }
  // The core's FMA peak just before the timed runs: this host's clock moves within minutes.
  const double fma_peak = glossa::bench::MeasureFmaPeak();
  absl::StatusOr<Timing> timing =
      MedianRun(translator, chunks, options, absl::GetFlag(FLAGS_repeat));
  if (!timing.ok()) return timing.status();
  return RunJson(config, *timing, source_tokens, fma_peak);
}

absl::StatusOr<int64_t> SourceTokens(const glossa::Model& model,
                                     const std::vector<std::string>& sentences) {
  int64_t total = 0;
  for (const std::string& s : sentences) {
    absl::StatusOr<std::vector<int>> ids = model.tokenizer().EncodeSource(s);
    if (!ids.ok()) return ids.status();
    total += static_cast<int64_t>(ids->size()) - 1;  // without the final </s>
  }
  return total;
}

Json MachineJson() {
  const dnnl_version_t* v = dnnl_version();
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  return Json{
      {"nproc", std::thread::hardware_concurrency()},
      {"cpu_model", glossa::bench::CpuModel()},
      {"onednn_version", absl::StrCat(v->major, ".", v->minor, ".", v->patch)},
      {"onednn_hash", v->hash ? v->hash : ""},
      {"omp_wait_policy", wait_policy ? wait_policy : ""},
      {"load_average_1m", glossa::bench::LoadAverage()},
  };
}

std::string Notes() {
  return absl::StrCat(
      "target_tokens: generated ids of the best hypothesis, final EOS excluded; source_tokens: "
      "EncodeSource ids, EOS excluded. length_limited: best hypotheses cut by max_output_tokens. "
      "Batch size 1: one Translate call per sentence; batch B: one call per chunk of B consecutive "
      "sentences, and each sentence's latency is its chunk's call time. Percentiles interpolate "
      "linearly between closest ranks. seconds: the run with the median total time of --repeat "
      "runs, after an untimed warm-up (--warmup). peak_rss_mb is VmHWM, process-wide and "
      "monotonic across runs; rss_mb is VmRSS after the run. load_average_1m (/proc/loadavg, at "
      "the "
      "start and after each run) counts this process too: well above its threads means other work "
      "competed for the CPUs and the figures are low. gemm_roofline_share = "
      "target_tokens_per_s * (",
      kFlopPerTargetToken, " FLOP per target token + ", kFlopPerSourceToken,
      " * source_tokens / target_tokens) / (fma_peak_gflops_per_thread * threads * 4 for int8, "
      "2 for bfloat16), where fma_peak_gflops_per_thread is this core's fp32 FMA rate measured "
      "(0.3 s of multiply-add chains in registers) just before the configuration's timed runs; "
      "null without AVX2.");
}

Json ReportHeader(const std::string& model_path, const glossa::Model& model, size_t sentences) {
  return Json{{"machine", MachineJson()},
              {"started_at", absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone())},
              {"model", model_path},
              {"model_dtype", model.file().header().value("dtype", "float32")},
              {"input", absl::GetFlag(FLAGS_input)},
              {"sentences", sentences},
              {"max_output_tokens", absl::GetFlag(FLAGS_max_output_tokens)},
              {"repeat", std::max(1, absl::GetFlag(FLAGS_repeat))},
              {"notes", Notes()},
              {"runs", Json::array()}};
}

// Every (beam, batch) combination with `threads`, appended to report["runs"] in that nesting
// order.
absl::Status RunAll(const std::shared_ptr<const glossa::Model>& model,
                    const std::vector<std::string>& sentences, int64_t source_tokens, int threads,
                    const std::vector<std::vector<int>>& lists, Json& report) {
  for (int beam : lists[1]) {
    for (int batch : lists[2]) {
      for (absl::string_view controls : absl::StrSplit(absl::GetFlag(FLAGS_controls), ',')) {
        const std::string compute = model->info().dtype;
        const std::string name = absl::StrCat(compute, ", threads ", threads, ", beam ", beam,
                                              ", batch ", batch, ", controls ", controls);
        absl::StatusOr<Json> run = RunConfig(
            model, sentences, {compute, threads, beam, batch, std::string(controls)},
            source_tokens);
        if (!run.ok()) {
          return absl::Status(run.status().code(),
                              absl::StrCat(name, ": ", run.status().message()));
        }
        std::cerr << "glossa-bench: " << name << ": " << (*run)["seconds"] << " s, "
                  << (*run)["target_tokens_per_s"] << " target tokens/s, "
                  << (*run)["sentences_per_s"] << " sentences/s\n";
        report["runs"].push_back(*std::move(run));
      }
    }
  }
  return absl::OkStatus();
}

int Fail(const absl::Status& status, int exit_code) {
  std::cerr << "glossa-bench: " << status.message() << "\n";
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  glossa::SetUsage(
      "Measures translation speed of a Glossa model and prints one JSON object on stdout:\n"
      "target tokens/s, sentences/s, per-sentence latency percentiles and peak RSS for every\n"
      "(threads, beam size, batch size) combination. Progress goes to stderr.\n"
      "  glossa-bench [--model FILE] [--input FILE] [--beam_sizes 1,4] [--batch_sizes 1,32]");
  absl::ParseCommandLine(argc, argv);
  std::vector<std::vector<int>> lists;  // threads, beam sizes, batch sizes
  for (const auto& [name, flag] : {std::pair{"threads", absl::GetFlag(FLAGS_threads)},
                                   std::pair{"beam_sizes", absl::GetFlag(FLAGS_beam_sizes)},
                                   std::pair{"batch_sizes", absl::GetFlag(FLAGS_batch_sizes)}}) {
    absl::StatusOr<std::vector<int>> list = glossa::bench::ParseIntList(name, flag);
    if (!list.ok()) return Fail(list.status(), 2);
    lists.push_back(*std::move(list));
  }
  auto sentences = glossa::bench::ReadLines(absl::GetFlag(FLAGS_input), absl::GetFlag(FLAGS_limit));
  if (!sentences.ok()) return Fail(sentences.status(), 2);
  const std::string model_path = absl::GetFlag(FLAGS_model);
  Json report;
  for (absl::string_view compute : absl::StrSplit(absl::GetFlag(FLAGS_compute_types), ',')) {
    // A fresh model per thread count: oneDNN fixes a primitive's thread count when it is created
    // (on the first call of each row count), so primitives made for 1 thread stay 1 thread.
    for (int threads : lists[0]) {
      glossa::ModelOptions model_options;
      model_options.compute_type = std::string(compute);
      model_options.float32_output_layer = absl::GetFlag(FLAGS_float32_output_layer);
      model_options.argmax_screen = absl::GetFlag(FLAGS_argmax_screen);
      auto model = glossa::Model::Load(model_path, model_options);
      if (!model.ok()) return Fail(model.status(), 2);
      auto source_tokens = SourceTokens(**model, *sentences);
      if (!source_tokens.ok()) return Fail(source_tokens.status(), 2);
      if (report.is_null()) report = ReportHeader(model_path, **model, sentences->size());
      absl::Status s = RunAll(*model, *sentences, *source_tokens, threads, lists, report);
      if (!s.ok()) return Fail(s, 1);
    }
  }
  std::cout << report.dump(2) << std::endl;
  return 0;
}
