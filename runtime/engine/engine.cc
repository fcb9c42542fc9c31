#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "text/languages.h"
#include "util/malloc_tuning.h"
#include "util/status_macros.h"
#include "util/threads.h"

namespace glossa {

namespace {

std::vector<int> SourceTokens(const Job& job) {
  std::vector<int> tokens;
  tokens.reserve(job.sources.size());
  for (const auto& source : job.sources) tokens.push_back(static_cast<int>(source.size()));
  return tokens;
}

}  // namespace

// A submitted job: what admission sees of it (QueuedJob), and its results as they come.
struct JobState : QueuedJob {
  JobState(std::shared_ptr<Job> j, int kv_blocks_per_source)
      : QueuedJob(SourceTokens(*j)), job(std::move(j)), results(job->sources.size()) {
    remaining = static_cast<int>(job->sources.size());
    lane = job->lane;
    deadline = job->deadline;
    beam_size = job->search.beam_size;
    kv_blocks = kv_blocks_per_source;
    max_new_tokens = job->search.max_new_tokens;
    prefix_tokens = static_cast<int>(job->search.prefix.size());
  }
  std::shared_ptr<Job> job;
  std::atomic<bool> first_tokens_seen{false};
  absl::Mutex mu;
  std::vector<std::vector<Hypothesis>> results ABSL_GUARDED_BY(mu);
  int remaining ABSL_GUARDED_BY(mu);
  bool finished ABSL_GUARDED_BY(mu) = false;  // QueuedJob::done is its lock-free view
};

namespace {

// Every job the engine queues is a JobState.
JobState& StateOf(const Admitted& admitted) { return static_cast<JobState&>(*admitted.job); }

}  // namespace

struct Engine::Worker {
  explicit Worker(const Model& model) : batch(model) {}
  StepBatch batch;  // touched only by this worker's thread
  std::thread thread;
  // Share of the recent time (AdmissionPolicy::NextBatchTimeShare) this worker spent in steps
  // that decoded batch-lane rows.
  double batch_time_share = 0.0;
};

namespace {

int MaxOutputTokens(const Model& model, int requested) {
  const int limit = std::min(model.info().generation.max_length - 1, model.config().max_positions);
  return requested <= 0 || requested > limit ? limit : requested;
}

AdmissionOptions AdmissionOptionsFor(const EngineOptions& options, int64_t kv_budget_blocks) {
  AdmissionOptions admission;
  admission.max_active_sequences = options.max_active_sequences;
  admission.max_active_rows = options.max_active_rows;
  admission.max_encoder_tokens = options.max_encoder_tokens;
  admission.kv_budget_blocks = kv_budget_blocks;
  admission.batch_min_share = options.batch_min_share;
  admission.interactive_hold = options.interactive_hold;
  admission.deadline_admission = options.deadline_admission;
  return admission;
}

}  // namespace

Engine::Engine(std::shared_ptr<const Model> model, EngineOptions options)
    : model_(std::move(model)),
      options_(options),
      pool_(KvCache::BlockFloats(model_->config().decoder_layers, model_->config().d_model),
            std::max<int64_t>(1, options.kv_cache_bytes /
                                     (KvCache::BlockFloats(model_->config().decoder_layers,
                                                           model_->config().d_model) * 4))) {
  RetainFreedMemory();
  const ModelConfig& c = model_->config();
  options_.max_output_tokens = MaxOutputTokens(*model_, options_.max_output_tokens);
  options_.workers = std::max(0, options_.workers);
  vocab_.vocab_size = c.target_vocab_size;
  vocab_.eos_id = c.eos_id;
  vocab_.decoder_start_id = c.decoder_start_id;
  vocab_.forced_eos_id = model_->info().generation.forced_eos_id;
  vocab_.banned_ids = c.banned_ids;
  kv_budget_blocks_ = std::max<int64_t>(1, options_.kv_cache_bytes / pool_.block_bytes());
  policy_ = AdmissionPolicy(AdmissionOptionsFor(options_, kv_budget_blocks_));
  if (options_.workers == 0) manual_ = std::make_unique<Worker>(*model_);
  for (int i = 0; i < options_.workers; ++i) {
    workers_.push_back(std::make_unique<Worker>(*model_));
    Worker* w = workers_.back().get();
    w->thread = std::thread([this, w] { WorkerLoop(w); });
  }
}

Engine::~Engine() { Shutdown(absl::InfinitePast()); }

absl::Time Engine::Now() const {
  return options_.clock != nullptr ? options_.clock->Now() : absl::Now();
}

namespace {

absl::Status ResolveSampling(const TranslateOptions& o, SearchOptions& s) {
  const SamplingOptions& in = o.sampling;
  if (std::isnan(in.temperature) || in.temperature < 0.0f) {
    return absl::InvalidArgumentError(
        "sampling_temperature must be in (0, 100] to sample, or 0 for beam search / greedy");
  }
  if (in.temperature == 0.0f) {
    if (in.top_k != 0 || (in.top_p != 0.0f && in.top_p != 1.0f)) {
      return absl::InvalidArgumentError(
          "sampling_top_k / sampling_top_p need sampling_temperature > 0 (1.0 leaves the "
          "distribution unchanged)");
    }
    return absl::OkStatus();
  }
  if (in.temperature > 100.0f) {
    return absl::InvalidArgumentError("sampling_temperature must be in (0, 100]");
  }
  if (in.top_k < 0 || in.top_p < 0.0f || in.top_p > 1.0f) {
    return absl::InvalidArgumentError("sampling_top_k must be >= 0 and sampling_top_p in [0, 1]");
  }
  if (o.beam_size > 1 || s.num_hypotheses > 1) {
    return absl::InvalidArgumentError(
        "sampling draws one hypothesis: leave beam_size and num_hypotheses at 0 or 1");
  }
  s.beam_size = 1;
  s.sampling = in;
  if (s.sampling.top_p == 0.0f) s.sampling.top_p = 1.0f;
  if (s.sampling.seed == 0) s.sampling.seed = std::random_device()();
  return absl::OkStatus();
}

absl::Status ResolveControls(const TranslateOptions& o, SearchOptions& s) {
  const float penalty = o.repetition_penalty;
  if (!std::isfinite(penalty) || penalty < 0.0f) {
    return absl::InvalidArgumentError(absl::StrCat(
        "repetition_penalty ", penalty, " must be a finite number > 0 (1 or 0: off; above 1 "
        "discourages repetition)"));
  }
  s.repetition_penalty = penalty == 0.0f ? 1.0f : penalty;
  if (o.no_repeat_ngram_size < 0 || o.min_output_tokens < 0) {
    return absl::InvalidArgumentError("no_repeat_ngram_size and min_output_tokens must be >= 0");
  }
  s.no_repeat_ngram_size = o.no_repeat_ngram_size;
  s.min_new_tokens = o.min_output_tokens;
  if (s.min_new_tokens >= s.max_new_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_output_tokens ", s.min_new_tokens, " must be below max_output_tokens ",
        s.max_new_tokens, " (which counts the end of sentence)"));
  }
  s.token_scores = o.token_scores;
  s.alignment = o.alignment;
  s.scores = o.scores;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int>> Engine::EncodePrefix(const std::string& text) const {
  if (text.empty()) return std::vector<int>();
  auto ids = model_->tokenizer().EncodeTarget(text);
  if (!ids.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("target_prefix: ", ids.status().message()));
  }
  if (static_cast<int>(ids->size()) >= options_.max_output_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target_prefix has ", ids->size(), " tokens; it must leave room for the translation "
        "within the limit of ", options_.max_output_tokens, " tokens"));
  }
  return ids;
}

absl::StatusOr<SearchOptions> Engine::Resolve(const TranslateOptions& o) const {
  SearchOptions s;
  s.beam_size = o.beam_size > 0 ? o.beam_size : options_.default_beam_size;
  if (s.beam_size > options_.max_beam_size) {
    return absl::InvalidArgumentError(absl::StrCat("beam_size ", s.beam_size,
                                                   " exceeds the server's limit of ",
                                                   options_.max_beam_size));
  }
  s.num_hypotheses = o.num_hypotheses > 0 ? o.num_hypotheses : 1;
  if (s.num_hypotheses > s.beam_size) {
    return absl::InvalidArgumentError(absl::StrCat("num_hypotheses ", s.num_hypotheses,
                                                   " exceeds beam_size ", s.beam_size,
                                                   ": ask for at most beam_size hypotheses"));
  }
  GLOSSA_ASSIGN_OR_RETURN(const LanguagePair languages,
                          ResolveLanguages(model_->info(), model_->tokenizer(), o.source_language,
                                           o.target_language));
  s.forced_bos_id = languages.forced_bos_id;
  GLOSSA_ASSIGN_OR_RETURN(s.prefix, EncodePrefix(o.target_prefix));
  if (s.forced_bos_id >= 0 && !s.prefix.empty()) {
    // The target language token, then the prefix: Hugging Face's decoder_input_ids would be
    // [decoder start, language, prefix...] (its forced-BOS processor acts at position 1 only).
    s.prefix.insert(s.prefix.begin(), s.forced_bos_id);
    s.forced_bos_id = -1;
  }
  // The prefix and the new tokens share the model's positions.
  const int room = options_.max_output_tokens - static_cast<int>(s.prefix.size());
  s.max_new_tokens = o.max_output_tokens > 0 ? o.max_output_tokens : room;
  if (s.max_new_tokens > room) {
    return absl::InvalidArgumentError(
        s.prefix.empty()
            ? absl::StrCat("max_output_tokens ", s.max_new_tokens, " exceeds the limit of ",
                           options_.max_output_tokens)
            : absl::StrCat("max_output_tokens ", s.max_new_tokens, " plus the ",
                           s.prefix.size(), " tokens of target_prefix exceed the limit of ",
                           options_.max_output_tokens));
  }
  s.length_penalty = o.length_penalty.value_or(model_->info().generation.length_penalty);
  if (!(s.length_penalty >= -10.0f && s.length_penalty <= 10.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("length_penalty ", s.length_penalty, " is outside [-10, 10]"));
  }
  s.early_stopping = model_->info().generation.early_stopping;
  GLOSSA_RETURN_IF_ERROR(ResolveSampling(o, s));
  GLOSSA_RETURN_IF_ERROR(ResolveControls(o, s));
  return s;
}

int Engine::KvBlocksFor(const SearchOptions& search) const {
  const int per_slot = (search.positions() + KvCache::kBlockPositions - 1) /
                       KvCache::kBlockPositions;
  return search.beam_size * per_slot;
}

absl::Status Engine::CheckJob(const Job& job) const {
  const ModelConfig& c = model_->config();
  for (size_t i = 0; i < job.sources.size(); ++i) {
    const auto& src = job.sources[i];
    if (src.empty() || static_cast<int>(src.size()) > c.max_positions) {
      return absl::InvalidArgumentError(absl::StrCat(
          "text ", i, " has ", src.size(), " tokens; this model accepts 1 to ", c.max_positions,
          ": split long texts into sentences"));
    }
    for (int id : src) {
      if (id < 0 || id >= c.source_vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("text ", i, " holds token id ", id,
                                                       ", outside the source vocabulary"));
      }
    }
  }
  const SearchOptions& s = job.search;
  if (s.beam_size < 1 || s.beam_size > options_.max_beam_size || s.max_new_tokens < 1 ||
      s.positions() > options_.max_output_tokens || s.num_hypotheses > s.beam_size ||
      s.forced_bos_id >= c.target_vocab_size) {
    return absl::InvalidArgumentError("search options out of range (see Engine::Resolve)");
  }
  if (KvBlocksFor(s) > kv_budget_blocks_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "one sentence with beam_size ", s.beam_size, " and max_output_tokens ", s.positions(),
        " needs ", KvBlocksFor(s) * pool_.block_bytes() >> 20, " MiB of KV cache, more than the ",
        kv_budget_blocks_ * pool_.block_bytes() >> 20, " MiB budget: lower either option"));
  }
  return CheckConstraintsOf(job);
}

absl::Status Engine::CheckConstraintsOf(const Job& job) const {
  if (job.constraints.empty()) return absl::OkStatus();
  if (job.constraints.size() != job.sources.size()) {
    return absl::InvalidArgumentError("a job's constraints need one list per source");
  }
  SearchOptions with = job.search;
  for (size_t i = 0; i < job.constraints.size(); ++i) {
    if (job.constraints[i].empty()) continue;
    with.constraints = job.constraints[i];
    if (absl::Status ok = ValidateConstraints(with, vocab_); !ok.ok()) {
      return absl::Status(ok.code(), absl::StrCat("text ", i, ": ", ok.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status Engine::Submit(std::shared_ptr<Job> job) {
  GLOSSA_RETURN_IF_ERROR(CheckJob(*job));
  const SearchOptions& s = job->search;
  auto state = std::make_shared<JobState>(std::move(job), KvBlocksFor(s));
  state->submitted = Now();
  // It would join a batch of about the mean rows per worker.
  const int64_t rows = active_rows_.load() / std::max(1, options_.workers) + s.beam_size;
  if (absl::Status can = policy_.CheckCanFinish(estimate_.Read(), *state, rows, state->submitted);
      !can.ok()) {
    metrics_.refused_late_total.fetch_add(1, std::memory_order_relaxed);
    return can;
  }
  {
    absl::MutexLock lock(&mu_);
    if (!accepting_) return absl::UnavailableError("the server is shutting down: retry elsewhere");
    const int64_t n = state->sources();
    if (admission_.pending_sources + n > options_.max_queued_sources) {
      metrics_.rejected_total.fetch_add(1, std::memory_order_relaxed);
      return absl::ResourceExhaustedError(absl::StrCat(
          "the queue is full (", admission_.pending_sources, " sentences waiting, limit ",
          options_.max_queued_sources, "): retry later with backoff"));
    }
    if (n > 0) {
      live_jobs_.push_back(state);
      policy_.Enqueue(state, admission_);
      PublishQueued();
      work_.SignalAll();
      return absl::OkStatus();
    }
  }
  state->job->on_done(std::vector<std::vector<Hypothesis>>());  // nothing to translate
  return absl::OkStatus();
}

bool Engine::MarkFinished(const std::shared_ptr<JobState>& job) {
  {
    absl::MutexLock lock(&job->mu);
    if (job->finished) return false;
    job->finished = true;
    job->done.store(true);
  }
  absl::MutexLock lock(&mu_);
  live_jobs_.erase(std::remove(live_jobs_.begin(), live_jobs_.end(), job), live_jobs_.end());
  work_.SignalAll();
  return true;
}

void Engine::FinishJob(const std::shared_ptr<JobState>& job, JobResult result) {
  if (MarkFinished(job)) job->job->on_done(std::move(result));
}

void Engine::Release(SequenceGroup& group) {
  group.cache.reset();  // its blocks go back to the pool now
  active_sequences_.fetch_sub(1);
  active_by_lane_[static_cast<int>(group.job->job->lane)].fetch_sub(1);
  absl::MutexLock lock(&mu_);
  admission_.kv_reserved_blocks -= group.kv_blocks;
  work_.SignalAll();
}

bool Engine::WaitForWork(Worker* worker) {
  absl::MutexLock lock(&mu_);
  while (!(stop_ || abort_ || !worker->batch.empty() || policy_.HeadMayStart(admission_))) {
    if (admission_.empty()) {
      work_.Wait(&mu_);
    } else if (work_.WaitWithTimeout(&mu_, absl::Milliseconds(20))) {
      break;  // the head waits for KV room: return now and then to end cancelled or late jobs
    }
  }
  return !(worker->batch.empty() && admission_.empty() && (stop_ || abort_));
}

void Engine::Admit(Worker* worker, std::vector<Admitted>* admitted) {
  absl::MutexLock lock(&mu_);
  if (abort_) {
    // Nothing more is admitted: EndExpiredJobs ends every live job, queued ones included, with
    // UNAVAILABLE. Dropping the queues here lets the workers see them empty and exit.
    admission_.Clear();
    PublishQueued();
    return;
  }
  BatchLoad load;
  load.sequences = static_cast<int>(worker->batch.groups().size());
  load.rows = worker->batch.active_rows();
  for (const auto& g : worker->batch.groups()) {
    load.batch_lane_sequences += g->job->job->lane == Lane::kBatch ? 1 : 0;
  }
  load.interactive_sequences = active_by_lane_[static_cast<int>(Lane::kInteractive)].load();
  const absl::Time now = Now();
  policy_.Admit(load, now, admission_, admitted);
  for (const Admitted& a : *admitted) {
    const double waited = absl::ToDoubleSeconds(now - a.job->submitted);
    metrics_.queue_wait_seconds.Observe(waited);
    metrics_.lane_queue_wait_seconds[static_cast<int>(a.job->lane)].Observe(waited);
  }
  PublishQueued();
}

void Engine::PublishQueued() {
  queued_.store(admission_.pending_sources);
  for (int lane = 0; lane < kLanes; ++lane) {
    queued_by_lane_[lane].store(admission_.pending_by_lane[lane]);
  }
}

void Engine::EndExpiredJobs(Worker* worker) {
  std::vector<std::pair<std::shared_ptr<JobState>, absl::Status>> ending;
  const DecodeEstimate::Figures estimate = estimate_.Read();  // once for every job
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = Now();
    for (const auto& job : live_jobs_) {
      if (job->done.load()) continue;
      if (abort_) {
        ending.push_back({job, absl::UnavailableError("the server shut down before this "
                                                      "request finished: retry elsewhere")});
      } else if (job->job->cancelled.load(std::memory_order_relaxed)) {
        metrics_.cancelled_total.fetch_add(1, std::memory_order_relaxed);
        ending.push_back({job, absl::CancelledError("the request was cancelled")});
      } else if (now > job->job->deadline) {
        metrics_.expired_total.fetch_add(1, std::memory_order_relaxed);
        ending.push_back({job, absl::DeadlineExceededError(
                                   "the deadline passed before the translation finished")});
      } else if (absl::Status can = policy_.CheckCanFinish(
                     estimate, *job, worker->batch.active_rows() + job->beam_size, now);
                 !can.ok()) {
        metrics_.refused_late_total.fetch_add(1, std::memory_order_relaxed);
        ending.push_back({job, std::move(can)});
      }
    }
  }
  // Free the sequences first, so that on_done sees the engine without them.
  std::vector<std::pair<std::shared_ptr<JobState>, absl::Status>> to_notify;
  for (auto& [job, status] : ending) {
    if (MarkFinished(job)) to_notify.push_back({job, status});
  }
  std::vector<std::unique_ptr<SequenceGroup>> dropped;
  worker->batch.RemoveIf([](const SequenceGroup& g) { return g.job->done.load(); }, &dropped);
  for (const auto& g : dropped) {
    active_rows_.fetch_sub(g->search.active_beams());
    Release(*g);
  }
  for (auto& [job, status] : to_notify) job->job->on_done(status);
}

void Engine::StartSequences(Worker* worker, std::vector<Admitted>& admitted) {
  std::vector<Admitted> live;
  std::vector<std::vector<int>> sources;
  for (Admitted& a : admitted) {
    if (a.job->done.load()) {
      absl::MutexLock lock(&mu_);
      admission_.kv_reserved_blocks -= a.job->kv_blocks;
      continue;
    }
    sources.push_back(StateOf(a).job->sources[a.index]);
    live.push_back(std::move(a));
  }
  admitted.clear();
  if (live.empty()) return;
  size_t added = 0;
  try {  // an exception (no memory) fails these requests, not the process
    AddSequences(worker, live, sources, &added);
  } catch (const std::exception& e) {
    const absl::Status failed =
        absl::InternalError(absl::StrCat("the engine could not start the request: ", e.what()));
    {
      absl::MutexLock lock(&mu_);
      for (size_t i = added; i < live.size(); ++i) {
        admission_.kv_reserved_blocks -= live[i].job->kv_blocks;
      }
      work_.SignalAll();
    }
    // Their sequences already in the batch end at the next iteration (their jobs are done).
    for (const Admitted& a : live) FinishJob(std::static_pointer_cast<JobState>(a.job), failed);
  }
}

void Engine::AddSequences(Worker* worker, const std::vector<Admitted>& live,
                          const std::vector<std::vector<int>>& sources, size_t* added) {
  const absl::Time start = Now();
  std::shared_ptr<EncodedBatch> encoded = model_->encoder().Encode(sources);
  model_->decoder().PrecomputeCrossKv(*encoded);
  // From here on the sequences read only the cross keys and values: the encoder output goes
  // back to malloc now, for the next call to reuse, instead of living as long as the sentences.
  std::vector<float>().swap(encoded->hidden);
  metrics_.encoder_seconds.Observe(absl::ToDoubleSeconds(Now() - start));
  int64_t longest = 0;
  for (const auto& src : sources) longest = std::max<int64_t>(longest, src.size());
  metrics_.encoder_real_tokens_total.fetch_add(encoded->total_rows, std::memory_order_relaxed);
  metrics_.encoder_padded_tokens_total.fetch_add(longest * static_cast<int64_t>(sources.size()),
                                                 std::memory_order_relaxed);
  const ModelConfig& c = model_->config();
  for (size_t i = 0; i < live.size(); ++i) {
    JobState& job = StateOf(live[i]);
    const SearchOptions& search = job.job->search;
    auto group = std::make_unique<SequenceGroup>(
        NewSearch(*job.job, live[i].index), encoded, static_cast<int>(i),
        std::make_unique<KvCache>(&pool_, c.decoder_layers, c.d_model, search.beam_size,
                                  search.positions()));
    group->job = std::static_pointer_cast<JobState>(live[i].job);
    group->index = live[i].index;
    group->kv_blocks = KvBlocksFor(search);
    active_sequences_.fetch_add(1);
    active_by_lane_[static_cast<int>(job.lane)].fetch_add(1);
    active_rows_.fetch_add(1);
    worker->batch.Add(std::move(group));
    ++*added;
  }
}

Search Engine::NewSearch(const Job& job, int source) const {
  if (job.constraints.empty() || job.constraints[source].empty()) {
    return Search(job.search, vocab_);
  }
  SearchOptions with = job.search;
  with.constraints = job.constraints[source];
  return Search(with, vocab_);
}

bool Engine::PauseBatchWork(Worker* worker) {
  bool interactive = false;
  for (const auto& g : worker->batch.groups())
    interactive |= g->job->job->lane == Lane::kInteractive;
  const bool pause = policy_.PauseBatchRows(interactive, worker->batch_time_share);
  bool batch_steps = false;
  bool paused = false;
  for (const auto& g : worker->batch.groups()) {
    g->paused = pause && g->job->job->lane == Lane::kBatch;
    batch_steps |= g->job->job->lane == Lane::kBatch && !g->paused;
    paused |= g->paused;
  }
  if (paused) batch_paused_steps_.fetch_add(1);
  return batch_steps;
}

int64_t Engine::StepOnce(Worker* worker) {
  const bool batch_steps = PauseBatchWork(worker);
  const int64_t rows_before = worker->batch.active_rows();
  const int64_t stepped_rows = worker->batch.stepped_rows();
  std::vector<std::unique_ptr<SequenceGroup>> finished;
  const absl::Time start = Now();
  absl::Status status;
  try {  // an exception (no memory) fails the batch's requests, not the process
    status = worker->batch.Step(&finished);
  } catch (const std::exception& e) {
    status = absl::InternalError(absl::StrCat("the engine failed a decoder step: ", e.what()));
  }
  const absl::Time end = Now();
  // A model file overwritten since the load: this step (or the encoder before it) may have read
  // the new bytes where weights stay in the file, so nothing it made is handed out.
  if (status.ok() && model_->file().changed()) status = model_->file().ChangedError();
  if (!status.ok()) {  // else cannot happen within the KV budget; end what was running, loudly
    EndEverySequence(worker, finished, status);
    return 0;
  }
  const double seconds = absl::ToDoubleSeconds(end - start);
  worker->batch_time_share =
      AdmissionPolicy::NextBatchTimeShare(worker->batch_time_share, end - start, batch_steps);
  steps_.fetch_add(1);
  step_rows_.fetch_add(stepped_rows);
  metrics_.decode_step_seconds.Observe(seconds);
  metrics_.batch_sequences.Observe(static_cast<double>(stepped_rows));
  for (const auto& g : worker->batch.groups()) ObserveFirstTokens(*g->job, end);
  for (const auto& g : finished) {
    ObserveFirstTokens(*g->job, end);
    RecordFinished(*g);
  }
  int64_t rows_after = 0;
  for (const auto& g : worker->batch.groups()) rows_after += g->search.active_beams();
  active_rows_.fetch_add(rows_after - rows_before);

  std::vector<std::pair<std::shared_ptr<JobState>, std::vector<std::vector<Hypothesis>>>> complete;
  for (const auto& g : finished) {
    {
      absl::MutexLock lock(&g->job->mu);
      g->job->results[g->index] = g->search.Results();
      if (--g->job->remaining == 0) complete.push_back({g->job, std::move(g->job->results)});
    }
    Release(*g);
  }
  StreamStableTokens(worker);
  for (auto& [job, results] : complete) FinishJob(job, std::move(results));
  return stepped_rows;
}

void Engine::EndEverySequence(Worker* worker, std::vector<std::unique_ptr<SequenceGroup>>& finished,
                              const absl::Status& status) {
  worker->batch.RemoveIf([](const SequenceGroup&) { return true; }, &finished);
  for (const auto& g : finished) {
    active_rows_.fetch_sub(g->search.active_beams());
    Release(*g);
  }
  for (const auto& g : finished) FinishJob(g->job, status);
}

void Engine::ObserveFirstTokens(JobState& job, absl::Time now) {
  if (!job.first_tokens_seen.exchange(true)) {
    metrics_.time_to_first_token_seconds.Observe(absl::ToDoubleSeconds(now - job.submitted));
  }
}

void Engine::StreamStableTokens(Worker* worker) {
  for (const auto& g : worker->batch.groups()) {
    if (!g->job->job->on_tokens || g->job->done.load()) continue;
    if (g->search.StablePrefixLength() <= g->streamed) continue;  // (without allocating)
    std::vector<int> prefix = g->search.StablePrefix();
    g->streamed = prefix.size();
    g->job->job->on_tokens(prefix);
  }
}

void Engine::Iterate(Worker* worker) {
  std::vector<Admitted> admitted;
  const absl::Time start = Now();
  EndExpiredJobs(worker);  // first, so that jobs that cannot finish in time are not admitted
  Admit(worker, &admitted);
  StartSequences(worker, admitted);
  if (worker->batch.empty()) return;
  const int64_t rows = StepOnce(worker);
  // A sequence advances one token per iteration: what the estimate needs is the iteration's
  // time (admission and encoding included), not the decoder step's alone.
  if (rows > 0) estimate_.ObserveStep(rows, Now() - start);
}

void Engine::WorkerLoop(Worker* worker) {
  SetComputeThreads(options_.threads_per_worker);
  while (WaitForWork(worker)) Iterate(worker);
  // Shutdown may set abort_ between an iteration's EndExpiredJobs and its Admit, which then drops
  // the queued jobs: ended here, or their callers would wait forever.
  EndExpiredJobs(worker);
}

bool Engine::RunOnce() {
  if (manual_ == nullptr) return false;
  {
    absl::MutexLock lock(&mu_);
    if (admission_.empty() && manual_->batch.empty() && live_jobs_.empty()) return false;
  }
  Iterate(manual_.get());
  return true;
}

void Engine::Shutdown(absl::Time deadline) {
  if (manual_ != nullptr) {  // no workers: drain on this thread
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        accepting_ = false;
        if (live_jobs_.empty() && manual_->batch.empty()) break;
        if (absl::Now() >= deadline) abort_ = true;
      }
      Iterate(manual_.get());
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    accepting_ = false;
    work_.SignalAll();
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return live_jobs_.empty(); };
    while (!idle()) {
      if (work_.WaitWithDeadline(&mu_, deadline) && !idle()) {
        abort_ = true;
        work_.SignalAll();
        break;
      }
    }
    stop_ = true;
    work_.SignalAll();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

void Engine::RecordFinished(const SequenceGroup& g) {
  const std::vector<Hypothesis> results = g.search.Results();
  if (results.empty()) return;
  const auto& tokens = results.front().tokens;
  const bool has_eos = !tokens.empty() && tokens.back() == vocab_.eos_id;
  // An EOS at the last allowed step may be the forced one: that output was cut too.
  const bool ended = has_eos && static_cast<int>(tokens.size()) < g.search.positions();
  // Generated tokens: the target prefix was given, not generated.
  const int64_t out =
      static_cast<int64_t>(tokens.size()) - g.search.prefix_length() - (has_eos ? 1 : 0);
  const int64_t in = static_cast<int64_t>(g.batch->lengths[g.source]);
  metrics_.sentences_total.fetch_add(1, std::memory_order_relaxed);
  metrics_.input_tokens_total.fetch_add(in, std::memory_order_relaxed);
  metrics_.output_tokens_total.fetch_add(out, std::memory_order_relaxed);
  if (!ended) metrics_.truncated_total.fetch_add(1, std::memory_order_relaxed);
  metrics_.input_tokens.Observe(static_cast<double>(in));
  metrics_.output_tokens.Observe(static_cast<double>(out));
  estimate_.ObserveSentence(in, out);
  metrics_.length_ratio.Observe(static_cast<double>(out) / static_cast<double>(std::max<int64_t>(1, in - 1)));
}

EngineStats Engine::stats() const {
  EngineStats s;
  s.queued_sources = queued_.load();
  for (int lane = 0; lane < kLanes; ++lane) s.queued_by_lane[lane] = queued_by_lane_[lane].load();
  s.active_sequences = active_sequences_.load();
  for (int lane = 0; lane < kLanes; ++lane) s.active_by_lane[lane] = active_by_lane_[lane].load();
  s.active_rows = active_rows_.load();
  s.kv_blocks_in_use = pool_.blocks_in_use();
  s.kv_bytes_in_use = s.kv_blocks_in_use * pool_.block_bytes();
  s.kv_bytes_capacity = kv_budget_blocks_ * pool_.block_bytes();
  s.kv_bytes_allocated = pool_.blocks_allocated() * pool_.block_bytes();
  s.steps = steps_.load();
  s.step_rows = step_rows_.load();
  s.batch_paused_steps = batch_paused_steps_.load();
  return s;
}

}  // namespace glossa
