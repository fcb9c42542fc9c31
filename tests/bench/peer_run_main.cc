// glossa-peer-run: Glossa's side of tests/bench/peer_compare.py. Translates a file the way the
// CTranslate2 driver beside it (peer_ct2_run.py) does, and prints one JSON line on stderr:
//   glossa-peer-run --model FILE --input FILE [--compute_type int8] [--beam_size 1]
//     [--batch_size 32] [--workers 1] [--threads 1] [--max_output_tokens 256]
//     [--min_output_tokens 0] [--output FILE]
//
// Timeline (the same in both drivers):
//   1. load: Model::Load + the engine, then the first input line alone is translated, greedy,
//      at most --first_max_output_tokens tokens; first_translation_s is the time from before
//      Model::Load to that line's result ("file to first translation"; peer_compare.py reads
//      the file into the page cache just before). rss_after_load_mb: the RSS then;
//      peak_rss_after_load_mb: the peak RSS up to then (VmHWM, reset before the load: the load's
//      peak). rss_file_after_load_mb, rss_file_mb: of the RSS, pages of mapped files (the model
//      file's read in place, the binary's, libraries').
//   2. warm-up: the first --warmup lines (at most --warmup_max_output_tokens tokens each), untimed.
//   3. the timed run: every line in ONE job, longest first (as Translator, glossa-translate and
//      CTranslate2's translate_batch do), decoded by --workers engine workers of --threads
//      OpenMP threads each, --batch_size sentences at once per worker (continuous batching).
//      --workers 2 --threads 1 is what glossa-server runs on a 2-core machine (its --workers 0).
// target_tokens: ids of the best hypothesis, final EOS and the forced target-language token not
// counted (CTranslate2's count leaves out both too). encoder_s and decode_steps_s split the
// timed run (from the engine's metrics, summed over workers; the rest is admission and queueing).
// fma_peak_gflops: one core's fp32 FMA rate, measured just before the timed run (bench_util.h).
// read_gbps, chase_ns: this process's memory read rate and latency, measured before the model
// loads (bench_util.h's MeasureMemory; ~0.8 s, not in any timed figure).
// projection_read_gbps: a read of the output projection's weights (projection_mb), as its
// products read them (the packed copy; the screen's int8 copy while the float32 one is not
// packed, in greedy cells with the screen), just before the timed run.
//
// screened_rows, candidates_per_screened_row, screen_mb: greedy steps decided by the output
// projection's ArgMaxScreen (--argmax_screen; without --scores, as CTranslate2's driver and
// glossa-server by default), the float32 logits computed per such row, the screen's memory. The
// screen is built on first use: in a greedy cell by the first translation (in load_s), never in
// a beam-search cell (its first translation, greedy, asks for scores).
//
// --min_output_tokens may equal --max_output_tokens (end of sentence never allowed, so every
// output has exactly that many tokens): the benchmark's fixed-length mode for random-weight
// models. Engine::Resolve wants the minimum below the maximum (as a request option), so the
// driver sets SearchOptions::min_new_tokens itself; the search bans EOS while fewer than
// min_new_tokens tokens were generated.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "bench_util.h"
#include "engine/engine.h"
#include "engine/model.h"
#include "engine/text_job.h"
#include "model/weights.h"
#include "nlohmann/json.hpp"
#include "ops/argmax_screen.h"
#include "ops/gemv.h"
#include "ops/linear.h"
#include "text/languages.h"
#include "util/threads.h"
#include "util/usage.h"

ABSL_FLAG(std::string, model, "", "Glossa model file");
ABSL_FLAG(std::string, input, "", "Source sentences, one per line");
ABSL_FLAG(std::string, output, "", "Write the translations here (one line each); empty: not written");
ABSL_FLAG(std::string, compute_type, "", glossa::kComputeTypeFlagHelp);
ABSL_FLAG(int, beam_size, 1, "Beam size (1 = greedy)");
ABSL_FLAG(int, batch_size, 32, "Sentences decoded together per worker (max_active_sequences)");
ABSL_FLAG(int, workers, 1, "Engine workers (step loops), as glossa-server --workers");
ABSL_FLAG(int, threads, 1, "OpenMP threads per worker, as glossa-server --threads");
ABSL_FLAG(int, max_output_tokens, 256, "Most tokens generated per sentence, EOS included");
ABSL_FLAG(int, min_output_tokens, 0,
          "End of sentence banned until this many tokens were generated; may equal "
          "--max_output_tokens (fixed-length outputs)");
ABSL_FLAG(int, warmup, 8, "Lines translated untimed before the timed run");
ABSL_FLAG(int, warmup_max_output_tokens, 0,
          "Warm-up: at most this many tokens per line, no minimum (0: as the timed run)");
ABSL_FLAG(int, first_max_output_tokens, 16,
          "The first translation (the load figure): line 1, greedy, at most this many tokens "
          "(0: the run's --max_output_tokens), no minimum");
ABSL_FLAG(std::string, source_language, "", "Source language (multilingual models)");
ABSL_FLAG(std::string, target_language, "", "Target language (multilingual models)");
ABSL_FLAG(bool, small_row_kernel, true,
          "Run float32 products of few rows (up to 32; 64 in decoder steps) through ops/gemv.h's "
          "kernel (false: oneDNN's matmul for every row count, to compare the two)");
ABSL_FLAG(bool, argmax_screen, true, glossa::kArgmaxScreenFlagHelp);
ABSL_FLAG(bool, scores, false,
          "Compute greedy scores (CTranslate2's driver asks for none, nor does glossa-server by "
          "default); without them greedy steps may use --argmax_screen");
ABSL_FLAG(int64_t, kv_cache_mb, 16384,
          "KV cache budget (worst case of the admitted sequences; blocks are allocated as used). "
          "Large, so that it never limits a batch: CTranslate2 has no such limit");

namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

int64_t MinorFaults() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// The bytes of the model's ArgMaxScreen, 0 where none was built.
int64_t ScreenBytes(const glossa::Model& model) {
  const auto& lazy = model.weights().lm_head_screen;
  const glossa::ArgMaxScreen* screen = lazy != nullptr ? lazy->IfBuilt() : nullptr;
  return screen != nullptr ? screen->bytes() : 0;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

int Fail(const std::string& message, int code) {
  std::cerr << "glossa-peer-run: " << message << "\n";
  return code;
}

// Translates `sources` (ids, each ending with </s>) as one job, longest first; the best
// hypothesis of each, in input order.
absl::StatusOr<std::vector<std::vector<int>>> RunJob(glossa::Engine& engine,
                                                     const std::vector<std::vector<int>>& sources,
                                                     const glossa::SearchOptions& search) {
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return sources[a].size() > sources[b].size();
  });
  auto job = std::make_shared<glossa::Job>();
  for (size_t i : order) job->sources.push_back(sources[i]);
  job->search = search;
  job->lane = glossa::Lane::kBatch;
  absl::Notification done;
  glossa::JobResult result;
  job->on_done = [&](glossa::JobResult r) {
    result = std::move(r);
    done.Notify();
  };
  if (absl::Status s = engine.Submit(job); !s.ok()) return s;
  done.WaitForNotification();
  if (!result.ok()) return result.status();
  std::vector<std::vector<int>> best(sources.size());
  for (size_t k = 0; k < order.size(); ++k) {
    if (!(*result)[k].empty()) best[order[k]] = std::move((*result)[k][0].tokens);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  glossa::SetUsage(
      "Glossa's driver of tests/bench/peer_compare.py: load, first translation, timed run of a "
      "whole file; one JSON line on stderr.\n"
      "  glossa-peer-run --model FILE --input FILE [--beam_size 1] [--batch_size 32] "
      "[--workers 1] [--threads 1]");
  absl::ParseCommandLine(argc, argv);
  glossa::gemv::internal::SetEnabled(absl::GetFlag(FLAGS_small_row_kernel));
  const int workers = std::max(1, absl::GetFlag(FLAGS_workers));
  const int threads = std::max(1, absl::GetFlag(FLAGS_threads));
  const int beam = std::max(1, absl::GetFlag(FLAGS_beam_size));
  const int batch = std::max(1, absl::GetFlag(FLAGS_batch_size));
  auto lines = glossa::bench::ReadLines(absl::GetFlag(FLAGS_input), 0);
  if (!lines.ok()) return Fail(std::string(lines.status().message()), 2);

  // Before the model loads: the probe's mapping is gone and the peak RSS reset by the time the
  // model's memory is touched.
  const glossa::bench::MemoryProbe memory = glossa::bench::MeasureMemory();
  glossa::SetComputeThreads(threads);
  const Clock::time_point t0 = Clock::now();
  glossa::ModelOptions model_options;
  model_options.compute_type = absl::GetFlag(FLAGS_compute_type);
  model_options.argmax_screen = absl::GetFlag(FLAGS_argmax_screen);
  auto model = glossa::Model::Load(absl::GetFlag(FLAGS_model), model_options);
  if (!model.ok()) return Fail(std::string(model.status().message()), 2);
  const double load_s = Seconds(Clock::now() - t0);

  glossa::EngineOptions e;
  e.workers = workers;
  e.threads_per_worker = threads;
  e.max_active_sequences = batch;
  e.max_active_rows = batch * beam;
  e.max_queued_sources = std::numeric_limits<int>::max();
  e.kv_cache_bytes = absl::GetFlag(FLAGS_kv_cache_mb) << 20;
  e.max_beam_size = std::max(16, beam);
  glossa::Engine engine(*model, e);

  glossa::TranslateOptions options;
  options.beam_size = beam;
  options.max_output_tokens = absl::GetFlag(FLAGS_max_output_tokens);
  options.scores = absl::GetFlag(FLAGS_scores);
  options.source_language = absl::GetFlag(FLAGS_source_language);
  options.target_language = absl::GetFlag(FLAGS_target_language);
  const int min_tokens = absl::GetFlag(FLAGS_min_output_tokens);
  if (min_tokens > options.max_output_tokens) {
    return Fail("--min_output_tokens exceeds --max_output_tokens", 2);
  }
  options.min_output_tokens = std::min(min_tokens, options.max_output_tokens - 1);
  auto search = engine.Resolve(options);
  if (!search.ok()) return Fail(std::string(search.status().message()), 2);
  search->min_new_tokens = min_tokens;
  auto languages = glossa::ResolveLanguages((*model)->info(), (*model)->tokenizer(),
                                            options.source_language, options.target_language);
  if (!languages.ok()) return Fail(std::string(languages.status().message()), 2);
  // The short first translation and warm-up: the forced language token is one of Glossa's
  // generated tokens, while CTranslate2 counts its target prefix apart.
  const int language_token = search->forced_bos_id >= 0 ? 1 : 0;
  auto sources = glossa::TokenizeTexts(**model, *lines, 0, languages->source_token);
  if (!sources.ok()) return Fail(std::string(sources.status().message()), 2);
  if (sources->sources.size() != lines->size()) return Fail("empty input lines", 2);

  // 1. The first line alone, greedy and short: file to first translation.
  glossa::TranslateOptions first_options = options;
  first_options.beam_size = 1;
  first_options.min_output_tokens = 0;
  // A beam-search cell stands for a process that serves beam search: its first translation asks
  // for scores, so that it does not build the greedy-only ArgMaxScreen (built on first use). A
  // greedy cell's first translation builds it, in its load time and peak RSS.
  first_options.scores = beam > 1 || options.scores;
  if (absl::GetFlag(FLAGS_first_max_output_tokens) > 0) {
    first_options.max_output_tokens = absl::GetFlag(FLAGS_first_max_output_tokens) + language_token;
  }
  auto first_search = engine.Resolve(first_options);
  if (!first_search.ok()) return Fail(std::string(first_search.status().message()), 2);
  auto first = RunJob(engine, {sources->sources[0]}, *first_search);
  if (!first.ok()) return Fail(std::string(first.status().message()), 1);
  const double first_translation_s = Seconds(Clock::now() - t0);
  const double rss_after_load_mb = glossa::bench::ProcStatusMb("VmRSS");
  const double peak_rss_after_load_mb = glossa::bench::ProcStatusMb("VmHWM");
  // Of which pages of mapped files (the model file's, the binary's): clean, shared, reclaimable.
  const double rss_file_after_load_mb = glossa::bench::ProcStatusMb("RssFile");

  // 2. Warm-up.
  const size_t warm = std::min(sources->sources.size(),
                               static_cast<size_t>(std::max(0, absl::GetFlag(FLAGS_warmup))));
  if (warm > 0) {
    glossa::SearchOptions warm_search = *search;
    if (absl::GetFlag(FLAGS_warmup_max_output_tokens) > 0) {
      glossa::TranslateOptions warm_options = options;
      warm_options.max_output_tokens =
          absl::GetFlag(FLAGS_warmup_max_output_tokens) + language_token;
      warm_options.min_output_tokens = 0;
      auto resolved = engine.Resolve(warm_options);
      if (!resolved.ok()) return Fail(std::string(resolved.status().message()), 2);
      warm_search = *resolved;
    }
    std::vector<std::vector<int>> head(sources->sources.begin(), sources->sources.begin() + warm);
    auto r = RunJob(engine, head, warm_search);
    if (!r.ok()) return Fail(std::string(r.status().message()), 1);
  }

  // 3. The timed run, after measuring the core's FMA peak (the host's clock moves).
  const double fma_peak = glossa::bench::MeasureFmaPeak();
  const glossa::ModelWeights& weights = (*model)->weights();
  const glossa::ArgMaxScreen* screen =
      weights.lm_head_screen != nullptr ? weights.lm_head_screen->IfBuilt() : nullptr;
  glossa::Linear::Span projection{nullptr, 0};
  if (weights.lm_head != nullptr && !weights.lm_head->packing_deferred()) {
    projection = weights.lm_head->WeightSpan();
  } else if (screen != nullptr) {
    projection = screen->codes();  // reading the mapped float32 weights would fault them in
  }
  const double projection_gbps = glossa::bench::MeasureReadGbps(projection.data, projection.bytes);
  const auto encoder_before = engine.metrics().encoder_seconds.Read();
  const auto steps_before = engine.metrics().decode_step_seconds.Read();
  const auto rows_before = engine.metrics().batch_sequences.Read();
  const int64_t faults_before = MinorFaults();
  const glossa::ArgMaxScreen::Counts screen_before = glossa::ArgMaxScreen::ProcessCounts();
  const Clock::time_point start = Clock::now();
  auto best = RunJob(engine, sources->sources, *search);
  const double wall = Seconds(Clock::now() - start);
  const int64_t faults = MinorFaults() - faults_before;
  const glossa::ArgMaxScreen::Counts screen_after = glossa::ArgMaxScreen::ProcessCounts();
  const auto encoder_after = engine.metrics().encoder_seconds.Read();
  const auto steps_after = engine.metrics().decode_step_seconds.Read();
  const auto rows_after = engine.metrics().batch_sequences.Read();
  if (!best.ok()) return Fail(std::string(best.status().message()), 1);

  const int eos = (*model)->config().eos_id;
  int64_t target_tokens = 0, source_tokens = 0, length_limited = 0;
  for (const auto& ids : *best) {
    int64_t n = static_cast<int64_t>(ids.size());
    const bool ends_with_eos = !ids.empty() && ids.back() == eos;
    if (ends_with_eos) --n; else ++length_limited;
    if (search->forced_bos_id >= 0 && !ids.empty() && ids.front() == search->forced_bos_id) --n;
    target_tokens += n;
  }
  for (const auto& s : sources->sources) source_tokens += static_cast<int64_t>(s.size()) - 1;

  if (!absl::GetFlag(FLAGS_output).empty()) {
    std::vector<std::vector<glossa::Hypothesis>> hyps(best->size());
    for (size_t i = 0; i < best->size(); ++i) hyps[i].push_back({(*best)[i], 0.0f, {}});
    std::ofstream out(absl::GetFlag(FLAGS_output));
    for (const auto& t : glossa::DetokenizeResults(**model, *sources, std::move(hyps))) {
      out << (t.hypotheses.empty() ? std::string() : t.hypotheses[0].text) << "\n";
    }
  }

  using glossa::bench::Round;
  Json report{
      {"engine", "glossa"},
      {"model", absl::GetFlag(FLAGS_model)},
      {"compute_type", (*model)->info().dtype},
      {"beam_size", beam},
      {"batch_size", batch},
      {"workers", workers},
      {"threads", threads},
      {"small_row_kernel", absl::GetFlag(FLAGS_small_row_kernel)},
      {"sentences", lines->size()},
      {"source_tokens", source_tokens},
      {"target_tokens", target_tokens},
      {"length_limited", length_limited},
      {"load_s", Round(load_s, 4)},
      {"first_translation_s", Round(first_translation_s, 4)},
      {"rss_after_load_mb", Round(rss_after_load_mb, 1)},
      {"peak_rss_after_load_mb", Round(peak_rss_after_load_mb, 1)},
      {"rss_file_after_load_mb", Round(rss_file_after_load_mb, 1)},
      {"rss_file_mb", Round(glossa::bench::ProcStatusMb("RssFile"), 1)},
      {"wall_s", Round(wall, 4)},
      {"target_tokens_per_s", Round(wall > 0 ? target_tokens / wall : 0.0, 1)},
      // Where the timed run's time went (summed over workers): encoder calls (with the cross
      // K/V projections) and decoder steps (search included); their count.
      {"encoder_s", Round(encoder_after.sum - encoder_before.sum, 4)},
      {"encoder_calls", encoder_after.count - encoder_before.count},
      {"decode_steps_s", Round(steps_after.sum - steps_before.sum, 4)},
      {"decode_steps", steps_after.count - steps_before.count},
      // Decoder rows computed (one per active beam per step): the decoding work, which for
      // beam search depends on the stopping rule, not only on the tokens output.
      {"decoder_rows", std::llround(rows_after.sum - rows_before.sum)},
      // Page faults in the timed run (the process's, all threads): memory first touched then.
      {"minor_faults", faults},
      {"peak_rss_mb", Round(glossa::bench::ProcStatusMb("VmHWM"), 1)},
      {"fma_peak_gflops", Round(fma_peak * 1e-9, 1)},  // one core, just before the timed run
      // This process's memory before the model loaded (bench_util.h's MeasureMemory).
      {"read_gbps", Round(memory.read_gbps, 1)},
      {"chase_ns", Round(memory.chase_ns, 1)},
      // The output projection's weights as the products read them, just before the timed run.
      {"projection_read_gbps", Round(projection_gbps, 1)},
      {"projection_mb", Round(static_cast<double>(projection.bytes) / (1 << 20), 1)},
      // Whether the float32 projection has its packed copy after the timed run (not while only
      // screened greedy steps have run: ops/linear.h's Packing::kDeferred).
      {"projection_packed", weights.lm_head != nullptr && weights.lm_head->packed()},
      // Greedy rows decided by the output projection's ArgMaxScreen in the timed run, and the
      // ids per such row whose float32 logits it computed; screen_mb: the screen's memory.
      {"screened_rows", screen_after.rows - screen_before.rows},
      {"candidates_per_screened_row",
       Round(static_cast<double>(screen_after.candidates - screen_before.candidates) /
                 std::max<int64_t>(1, screen_after.rows - screen_before.rows),
             2)},
      {"screen_mb", Round(static_cast<double>(ScreenBytes(**model)) / (1 << 20), 1)},
  };
  std::cerr << report.dump() << std::endl;
  return 0;
}
