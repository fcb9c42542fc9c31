// glossa-constraint-bench: the cost of constrained beam search (glossary terms) in a batch.
//   glossa-constraint-bench [--model FILE] [--golden constraints.jsonl] [--shares 0,10,100]
//     [--repeats 3] [--beam_size 4] [--batch_size 32] [--max_output_tokens 128] [--threads 1]
//
// Sources: the distinct dev lines of the constraint goldens (../shared/golden/constraints/
// opus-mt-es-en-bible: 150 lines), their golden src_ids. A constrained row gets the
// force_words_ids of its line's --case case (the line's first case where it has none). For a
// share p, row r (input order) is constrained when floor((r + 1) p / 100) > floor(r p / 100):
// 10% constrains rows 9, 19, ..., 149 (15 of 150).
//
// One Engine (1 worker, --threads OpenMP threads, --batch_size sentences and batch × beam rows at
// once, as glossa-peer-run sets it) decodes every configuration, in two modes:
//   job:   all rows in ONE job, longest first, continuous batching (as glossa-peer-run and
//          Translator): tokens/s, sentences/s, decoder rows, decode-step time per decoder row;
//   waves: rows in consecutive groups of --batch_size (input order), each group submitted as
//          one-source jobs at once and all admitted together, the next group after the last one
//          ends: each row's decode time (group start to its on_done). A row unconstrained in two
//          configurations generates the same tokens in both, in the same group, so the ratio of
//          its two decode times is what the other rows' constraints cost it (their constrained
//          search, and their staying longer in the batch).
// Configurations alternate within each repeat (0%, 10%, 100%, 0%, ...) after an untimed warm-up;
// the summary gives medians over repeats. One JSON object on stdout.
// target_tokens: ids of the best hypotheses, end of sentence not counted.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "bench_util.h"
#include "engine/engine.h"
#include "engine/model.h"
#include "nlohmann/json.hpp"
#include "util/threads.h"
#include "util/usage.h"

ABSL_FLAG(std::string, model, GLOSSA_DEMO_MODEL, "Glossa model file");
ABSL_FLAG(std::string, golden,
          std::string(GLOSSA_SHARED_DIR) +
              "/golden/constraints/opus-mt-es-en-bible/constraints.jsonl",
          "Constraint goldens (JSON lines with i, case, src_ids, force_words_ids)");
ABSL_FLAG(std::string, case_kind, "one",
          "Whose force_words_ids a constrained row gets: one, phrase, two, either or present");
ABSL_FLAG(std::string, shares, "0,10,100", "Percentages of constrained rows, alternated");
ABSL_FLAG(std::string, modes, "job,waves", "job (one job, continuous batching) and/or waves");
ABSL_FLAG(int, repeats, 3, "Rounds of every configuration");
ABSL_FLAG(int, beam_size, 4, "Beam size (2 or more)");
ABSL_FLAG(int, batch_size, 32, "Sentences decoded together (max_active_sequences)");
ABSL_FLAG(int, max_output_tokens, 128, "Most tokens generated per sentence, EOS included");
ABSL_FLAG(int, threads, 1, "OpenMP threads of the engine's worker");
ABSL_FLAG(int, limit, 0, "Use the first N lines (0: all)");

namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

struct Line {
  int index = 0;
  std::vector<int> source;
  std::vector<glossa::Constraint> constraints;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

int Fail(const std::string& message) {
  std::cerr << "glossa-constraint-bench: " << message << "\n";
  return 1;
}

std::vector<glossa::Constraint> ForceWordsIds(const nlohmann::json& force_words_ids) {
  std::vector<glossa::Constraint> constraints;
  for (const auto& word : force_words_ids) {
    glossa::Constraint c;
    if (word.at(0).is_array()) {
      c.alternatives = word.get<std::vector<std::vector<int>>>();
    } else {
      c.alternatives = {word.get<std::vector<int>>()};
    }
    constraints.push_back(std::move(c));
  }
  return constraints;
}

// The distinct lines of the goldens, in line order, each with its --case_kind constraints.
absl::StatusOr<std::vector<Line>> ReadGolden(const std::string& path, const std::string& kind) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<Line> lines;
  std::vector<bool> has_kind;
  std::string text;
  while (std::getline(in, text)) {
    const auto c = nlohmann::json::parse(text);
    const int i = c["i"].get<int>();
    auto it = std::find_if(lines.begin(), lines.end(), [&](const Line& l) { return l.index == i; });
    if (it == lines.end()) {
      lines.push_back(
          {i, c["src_ids"].get<std::vector<int>>(), ForceWordsIds(c["force_words_ids"])});
      has_kind.push_back(c["case"] == kind);
    } else if (c["case"] == kind && !has_kind[it - lines.begin()]) {
      it->constraints = ForceWordsIds(c["force_words_ids"]);
      has_kind[it - lines.begin()] = true;
    }
  }
  std::vector<size_t> order(lines.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return lines[a].index < lines[b].index; });
  std::vector<Line> sorted;
  for (size_t k : order) sorted.push_back(std::move(lines[k]));
  return sorted;
}

bool Constrained(size_t row, int share) { return (row + 1) * share / 100 > row * share / 100; }

struct RowResult {
  int tokens = 0;        // best hypothesis, EOS excluded
  double seconds = 0.0;  // waves: group start to on_done
  bool limited = false;  // no EOS: the length limit ended it
};

struct RunResult {
  double wall_s = 0.0;
  double decode_steps_s = 0.0;
  int64_t decode_steps = 0;
  int64_t decoder_rows = 0;
  std::vector<RowResult> rows;
};

int CountTokens(const std::vector<glossa::Hypothesis>& n_best, int eos, bool* limited) {
  if (n_best.empty()) return 0;
  const std::vector<int>& ids = n_best[0].tokens;
  int n = static_cast<int>(ids.size());
  *limited = ids.empty() || ids.back() != eos;
  if (!*limited) --n;
  return n;
}

// All rows in one job, longest first (continuous batching).
absl::StatusOr<RunResult> RunJob(glossa::Engine& engine, const std::vector<Line>& lines,
                                 const glossa::SearchOptions& search, int share, int eos) {
  std::vector<size_t> order(lines.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return lines[a].source.size() > lines[b].source.size();
  });
  auto job = std::make_shared<glossa::Job>();
  job->search = search;
  job->lane = glossa::Lane::kBatch;
  for (size_t r : order) {
    job->sources.push_back(lines[r].source);
    job->constraints.push_back(Constrained(r, share) ? lines[r].constraints
                                                     : std::vector<glossa::Constraint>{});
  }
  if (share == 0) job->constraints.clear();
  absl::Notification done;
  glossa::JobResult result;
  job->on_done = [&](glossa::JobResult r) {
    result = std::move(r);
    done.Notify();
  };
  const auto steps_before = engine.metrics().decode_step_seconds.Read();
  const auto rows_before = engine.metrics().batch_sequences.Read();
  const Clock::time_point start = Clock::now();
  if (absl::Status s = engine.Submit(job); !s.ok()) return s;
  done.WaitForNotification();
  RunResult out;
  out.wall_s = Seconds(Clock::now() - start);
  if (!result.ok()) return result.status();
  const auto steps_after = engine.metrics().decode_step_seconds.Read();
  const auto rows_after = engine.metrics().batch_sequences.Read();
  out.decode_steps_s = steps_after.sum - steps_before.sum;
  out.decode_steps = steps_after.count - steps_before.count;
  out.decoder_rows = std::llround(rows_after.sum - rows_before.sum);
  out.rows.resize(lines.size());
  for (size_t k = 0; k < order.size(); ++k) {
    RowResult& row = out.rows[order[k]];
    row.tokens = CountTokens((*result)[k], eos, &row.limited);
  }
  return out;
}

// Groups of `batch` rows, each row its own job, a group's jobs submitted together.
absl::StatusOr<RunResult> RunWaves(glossa::Engine& engine, const std::vector<Line>& lines,
                                   const glossa::SearchOptions& search, int share, int batch,
                                   int eos) {
  RunResult out;
  out.rows.resize(lines.size());
  const auto steps_before = engine.metrics().decode_step_seconds.Read();
  const auto rows_before = engine.metrics().batch_sequences.Read();
  const Clock::time_point start = Clock::now();
  for (size_t first = 0; first < lines.size(); first += batch) {
    const size_t end = std::min(lines.size(), first + batch);
    absl::BlockingCounter pending(static_cast<int>(end - first));
    std::mutex mu;
    absl::Status failed;
    std::vector<std::shared_ptr<glossa::Job>> jobs;
    const Clock::time_point group_start = Clock::now();
    for (size_t r = first; r < end; ++r) {
      auto job = std::make_shared<glossa::Job>();
      job->search = search;
      job->lane = glossa::Lane::kBatch;
      job->sources = {lines[r].source};
      if (Constrained(r, share)) job->constraints = {lines[r].constraints};
      job->on_done = [&, r](glossa::JobResult result) {
        const double seconds = Seconds(Clock::now() - group_start);
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!result.ok()) {
            failed = result.status();
          } else {
            RowResult& row = out.rows[r];
            row.seconds = seconds;
            row.tokens = CountTokens((*result)[0], eos, &row.limited);
          }
        }
        pending.DecrementCount();
      };
      jobs.push_back(std::move(job));
    }
    for (auto& job : jobs) {
      if (absl::Status s = engine.Submit(job); !s.ok()) return s;
    }
    pending.Wait();
    if (!failed.ok()) return failed;
  }
  out.wall_s = Seconds(Clock::now() - start);
  const auto steps_after = engine.metrics().decode_step_seconds.Read();
  const auto rows_after = engine.metrics().batch_sequences.Read();
  out.decode_steps_s = steps_after.sum - steps_before.sum;
  out.decode_steps = steps_after.count - steps_before.count;
  out.decoder_rows = std::llround(rows_after.sum - rows_before.sum);
  return out;
}

double Median(std::vector<double> v) { return glossa::bench::Percentile(std::move(v), 50); }

}  // namespace

int main(int argc, char** argv) {
  glossa::SetUsage(
      "The cost of constrained beam search: golden lines decoded with 0%, 10% and 100% of the "
      "rows constrained, alternated; one JSON object on stdout.\n"
      "  glossa-constraint-bench [--shares 0,10,100] [--repeats 3] [--modes job,waves]");
  absl::ParseCommandLine(argc, argv);
  using glossa::bench::Round;
  std::vector<int> shares;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_shares), ',')) {
    int share = 0;
    if (!absl::SimpleAtoi(s, &share) || share < 0 || share > 100) {
      return Fail(absl::StrCat("--shares: '", s, "' is not a percentage"));
    }
    shares.push_back(share);
  }
  const std::vector<std::string> modes = absl::StrSplit(absl::GetFlag(FLAGS_modes), ',');
  for (const std::string& mode : modes) {
    if (mode != "job" && mode != "waves") return Fail("--modes: job and/or waves");
  }
  auto lines = ReadGolden(absl::GetFlag(FLAGS_golden), absl::GetFlag(FLAGS_case_kind));
  if (!lines.ok()) return Fail(std::string(lines.status().message()));
  if (absl::GetFlag(FLAGS_limit) > 0 && lines->size() > size_t(absl::GetFlag(FLAGS_limit))) {
    lines->resize(absl::GetFlag(FLAGS_limit));
  }
  const int beam = absl::GetFlag(FLAGS_beam_size);
  const int batch = std::max(1, absl::GetFlag(FLAGS_batch_size));
  const int threads = std::max(1, absl::GetFlag(FLAGS_threads));
  glossa::SetComputeThreads(threads);
  auto model = glossa::Model::Load(absl::GetFlag(FLAGS_model));
  if (!model.ok()) return Fail(std::string(model.status().message()));
  glossa::EngineOptions e;
  e.workers = 1;
  e.threads_per_worker = threads;
  e.max_active_sequences = batch;
  e.max_active_rows = batch * beam;
  e.max_encoder_tokens = std::numeric_limits<int>::max();  // a wave is admitted at once
  e.max_queued_sources = std::numeric_limits<int>::max();
  e.kv_cache_bytes = int64_t{16} << 30;
  e.max_beam_size = std::max(16, beam);
  glossa::Engine engine(*model, e);
  glossa::TranslateOptions options;
  options.beam_size = beam;
  options.max_output_tokens = absl::GetFlag(FLAGS_max_output_tokens);
  auto search = engine.Resolve(options);
  if (!search.ok()) return Fail(std::string(search.status().message()));
  const int eos = (*model)->config().eos_id;

  // Untimed warm-up: the first batch's rows, constrained and not.
  {
    std::vector<Line> head(lines->begin(), lines->begin() + std::min<size_t>(batch, lines->size()));
    for (int share : {0, 100}) {
      auto r = RunJob(engine, head, *search, share, eos);
      if (!r.ok()) return Fail(std::string(r.status().message()));
    }
  }

  Json runs = Json::array();
  // [mode][share] -> per repeat
  std::map<std::string, std::map<int, std::vector<RunResult>>> results;
  for (int repeat = 0; repeat < absl::GetFlag(FLAGS_repeats); ++repeat) {
    for (const std::string& mode : modes) {
      for (int share : shares) {
        auto r = mode == "job" ? RunJob(engine, *lines, *search, share, eos)
                               : RunWaves(engine, *lines, *search, share, batch, eos);
        if (!r.ok()) return Fail(std::string(r.status().message()));
        int64_t tokens = 0, limited = 0, constrained = 0;
        for (size_t k = 0; k < r->rows.size(); ++k) {
          tokens += r->rows[k].tokens;
          limited += r->rows[k].limited;
          constrained += Constrained(k, share);
        }
        runs.push_back(Json{
            {"repeat", repeat},
            {"mode", mode},
            {"constrained_share", share},
            {"constrained_rows", constrained},
            {"sentences", r->rows.size()},
            {"target_tokens", tokens},
            {"length_limited", limited},
            {"wall_s", Round(r->wall_s, 4)},
            {"target_tokens_per_s", Round(tokens / r->wall_s, 1)},
            {"sentences_per_s", Round(r->rows.size() / r->wall_s, 2)},
            {"decode_steps", r->decode_steps},
            {"decoder_rows", r->decoder_rows},
            {"decode_steps_s", Round(r->decode_steps_s, 4)},
            {"us_per_decoder_row",
             Round(1e6 * r->decode_steps_s / std::max<int64_t>(1, r->decoder_rows), 2)},
            {"load_average", Round(glossa::bench::LoadAverage(), 2)},
        });
        std::cerr << runs.back().dump() << "\n";
        results[mode][share].push_back(*std::move(r));
      }
    }
  }

  // Medians over repeats.
  Json summary = Json::array();
  for (const std::string& mode : modes) {
    for (int share : shares) {
      std::vector<double> tps, sps, wall, us_row;
      const auto& rs = results[mode][share];
      int64_t tokens = 0, rows = 0;
      for (const RunResult& r : rs) {
        tokens = 0;
        for (const RowResult& row : r.rows) tokens += row.tokens;
        rows = r.decoder_rows;
        tps.push_back(tokens / r.wall_s);
        sps.push_back(r.rows.size() / r.wall_s);
        wall.push_back(r.wall_s);
        us_row.push_back(1e6 * r.decode_steps_s / std::max<int64_t>(1, r.decoder_rows));
      }
      summary.push_back(Json{{"mode", mode},
                             {"constrained_share", share},
                             {"target_tokens", tokens},
                             {"decoder_rows", rows},
                             {"median_wall_s", Round(Median(wall), 3)},
                             {"median_target_tokens_per_s", Round(Median(tps), 1)},
                             {"median_sentences_per_s", Round(Median(sps), 2)},
                             {"median_us_per_decoder_row", Round(Median(us_row), 2)}});
    }
  }

  // Waves: the rows unconstrained at the lowest non-zero share, against the same rows at 0%.
  Json unconstrained_rows = nullptr;
  int low = 101;
  for (int share : shares) {
    if (share > 0) low = std::min(low, share);
  }
  if (results.count("waves") && results["waves"].count(0) && low <= 100) {
    const auto& base = results["waves"][0];
    const auto& mixed = results["waves"][low];
    std::vector<double> ratios, base_tps, mixed_tps;
    int rows = 0;
    for (size_t rep = 0; rep < base.size(); ++rep) {
      double base_tokens = 0, base_s = 0, mixed_tokens = 0, mixed_s = 0;
      rows = 0;
      for (size_t k = 0; k < lines->size(); ++k) {
        if (Constrained(k, low)) continue;
        ++rows;
        const RowResult& b = base[rep].rows[k];
        const RowResult& m = mixed[rep].rows[k];
        ratios.push_back(m.seconds / b.seconds);
        base_tokens += b.tokens;
        base_s += b.seconds;
        mixed_tokens += m.tokens;
        mixed_s += m.seconds;
      }
      base_tps.push_back(base_tokens / base_s);
      mixed_tps.push_back(mixed_tokens / mixed_s);
    }
    unconstrained_rows = Json{
        {"rows", rows},
        {"compared_shares", {0, low}},
        // Per row and repeat: its decode time at `low` over its decode time at 0%.
        {"median_decode_time_ratio", Round(Median(ratios), 4)},
        {"p10_decode_time_ratio", Round(glossa::bench::Percentile(ratios, 10), 4)},
        {"p90_decode_time_ratio", Round(glossa::bench::Percentile(ratios, 90), 4)},
        // Their tokens over the sum of their decode times, median over repeats.
        {"median_row_tokens_per_s_at_0", Round(Median(base_tps), 2)},
        {"median_row_tokens_per_s_at_low", Round(Median(mixed_tps), 2)},
    };
  }

  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  Json report{
      {"date", date},
      {"cpu", glossa::bench::CpuModel()},
      {"model", absl::GetFlag(FLAGS_model)},
      {"golden", absl::GetFlag(FLAGS_golden)},
      {"case_kind", absl::GetFlag(FLAGS_case_kind)},
      {"lines", lines->size()},
      {"beam_size", beam},
      {"batch_size", batch},
      {"max_output_tokens", absl::GetFlag(FLAGS_max_output_tokens)},
      {"threads", threads},
      {"repeats", absl::GetFlag(FLAGS_repeats)},
      {"summary", summary},
      {"unconstrained_rows_waves", unconstrained_rows},
      {"runs", runs},
  };
  std::cout << report.dump(1) << std::endl;
  return 0;
}
