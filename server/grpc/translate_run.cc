#include "server/grpc/translate_run.h"

#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "engine/document.h"
#include "engine/tagged_documents.h"
#include "util/status_macros.h"

namespace glossa::server {

struct TranslateRun::Part {
  RoutedPart routed;
  bool second_hop = false;  // the job running is the second of a pivot
  std::shared_ptr<PreparedRequest> p;
  // What the cache keys and ResultOf compares with: the sentences when the texts were split.
  std::vector<std::string> texts;
  std::vector<std::optional<Translation>> cached;
  // The job submitted last (guarded by the run's mu_). Weak: the job's on_done holds the run.
  std::weak_ptr<Job> job;
  std::vector<Translation> translations;  // the part's result, one per text
  RpcRecord::Result result;               // summed over its hops
};

namespace {

absl::Status Prepare(const RunContext& context, const v1::TranslateRequest& request,
                     TranslateRun::Part* part) {
  GLOSSA_ASSIGN_OR_RETURN(PreparedRequest p,
                          PrepareRequest(request, *context.registry, context.limits,
                                         /*stream=*/false, context.glossaries));
  part->p = std::make_shared<PreparedRequest>(std::move(p));
  if (part->p->documents != nullptr) {
    part->texts = part->p->documents->sentences;
  } else if (!part->p->tagged.empty()) {
    for (const TaggedText& t : part->p->tagged) part->texts.push_back(t.text);
  } else {
    part->texts.assign(request.texts().begin(), request.texts().end());
  }
  part->cached = TakeCached(context.cache, part->texts, part->p.get());
  return absl::OkStatus();
}

// The translations of a finished job, one per text of the part (its documents joined).
std::vector<Translation> Finished(ResultCache* cache, TranslateRun::Part* part,
                                  std::vector<std::vector<Hypothesis>> hypotheses) {
  const PreparedRequest& p = *part->p;
  std::vector<Translation> translations =
      DetokenizeResults(*p.model->model, p.sources, std::move(hypotheses));
  StoreAndMerge(cache, part->texts, p, std::move(part->cached), &translations);
  const RpcRecord::Result r = ResultOf(p, part->texts, translations);
  part->result.input_tokens += r.input_tokens;
  part->result.output_tokens += r.output_tokens;
  part->result.untranslated += r.untranslated;
  part->result.truncated += r.truncated;
  if (!p.tagged.empty()) {
    translations = WriteTags(*p.model->model, p.source_token, p.tagged, p.documents.get(),
                             std::move(translations));
  } else if (p.documents != nullptr) {
    translations = JoinDocuments(*p.documents, translations);
  }
  if (!p.return_alignment) {
    for (Translation& t : translations) {
      for (TranslatedHypothesis& h : t.hypotheses) h.alignment.clear();
    }
  }
  return translations;
}

}  // namespace

std::shared_ptr<Job> NewJob(const PreparedRequest& p, absl::Time deadline) {
  auto job = std::make_shared<Job>();
  job->sources = p.sources.sources;
  job->search = p.search;
  job->constraints = p.constraints;
  job->lane = p.lane;
  job->deadline = deadline;
  return job;
}

RpcRecord::Result ResultOf(const PreparedRequest& p, const std::vector<std::string>& texts,
                           const std::vector<Translation>& translations) {
  RpcRecord::Result r;
  for (const auto& source : p.sources.sources) {
    r.input_tokens += static_cast<int64_t>(source.size());
  }
  const int eos = p.model->model->config().eos_id;
  for (size_t i = 0; i < translations.size(); ++i) {
    if (translations[i].hypotheses.empty()) continue;
    const TranslatedHypothesis& best = translations[i].hypotheses.front();
    const std::vector<int>& ids = best.token_ids;
    const int64_t n = static_cast<int64_t>(ids.size());
    // The target prefix was given, not generated (an empty text has neither).
    const int64_t prefix = n > 0 ? static_cast<int64_t>(p.search.prefix.size()) : 0;
    r.output_tokens += n - prefix - (!ids.empty() && ids.back() == eos ? 1 : 0);
    if (n > 0 && n >= p.search.positions()) ++r.truncated;
    const absl::string_view text =
        i < texts.size() ? absl::StripAsciiWhitespace(texts[i]) : absl::string_view();
    if (!text.empty() && text == absl::StripAsciiWhitespace(best.text)) ++r.untranslated;
  }
  return r;
}

absl::StatusOr<std::shared_ptr<TranslateRun>> TranslateRun::Create(
    const RunContext& context, const v1::TranslateRequest& request, absl::Time deadline,
    RpcRecord* record, Done done) {
  GLOSSA_ASSIGN_OR_RETURN(RoutedRequest routed,
                          RouteRequest(request, *context.registry, context.pivot_language));
  std::shared_ptr<TranslateRun> run(new TranslateRun());
  run->context_ = context;
  run->deadline_ = deadline;
  run->record_ = record;
  run->done_ = std::move(done);
  run->detected_ = std::move(routed.detected);
  run->num_texts_ = request.texts_size();
  record->SetModel(routed.parts.front().request.model());
  for (RoutedPart& routed_part : routed.parts) {
    auto part = std::make_unique<Part>();
    part->routed = std::move(routed_part);
    GLOSSA_RETURN_IF_ERROR(Prepare(context, part->routed.request, part.get()));
    if (!part->routed.pivot.empty()) record->SetPivoted();
    run->parts_.push_back(std::move(part));
  }
  return run;
}

absl::Status TranslateRun::Submit(size_t i) {
  Part& part = *parts_[i];
  std::shared_ptr<Job> job = NewJob(*part.p, deadline_);
  job->on_done = [self = shared_from_this(), i](JobResult result) {
    self->PartDone(i, std::move(result));
  };
  {
    absl::MutexLock lock(&mu_);
    part.job = job;
  }
  return part.p->model->engine->Submit(job);  // may call on_done at once
}

absl::Status TranslateRun::Start() {
  {
    absl::MutexLock lock(&mu_);
    parts_left_ = parts_.size();
  }
  for (size_t i = 0; i < parts_.size(); ++i) {
    absl::Status submitted = Submit(i);
    if (submitted.ok()) continue;
    std::vector<std::shared_ptr<Job>> jobs;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return absl::OkStatus();  // done was called: the caller must not answer
      finished_ = true;
      for (size_t k = 0; k < i; ++k) jobs.push_back(parts_[k]->job.lock());
    }
    for (const auto& job : jobs) {
      if (job != nullptr) job->Cancel();
    }
    return submitted;
  }
  return absl::OkStatus();
}

void TranslateRun::Cancel() {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    for (const auto& part : parts_) {
      if (auto job = part->job.lock()) jobs.push_back(std::move(job));
    }
  }
  for (const auto& job : jobs) job->Cancel();
}

void TranslateRun::PartDone(size_t i, JobResult result) {
  if (!result.ok()) {
    Fail(result.status());
    return;
  }
  Part& part = *parts_[i];
  std::vector<Translation> translations = Finished(context_.cache, &part, *std::move(result));
  if (!part.routed.pivot.empty() && !part.second_hop) {
    if (context_.registry->IsLoaded(part.routed.second.model())) {
      if (absl::Status next = NextHop(i, translations); !next.ok()) Fail(next);
      return;
    }
    // The second model loads first: not on this thread, an engine worker of the first model
    // that its other requests wait for (and that unloading it would join).
    std::thread([self = shared_from_this(), i, translations = std::move(translations)] {
      if (absl::Status next = self->NextHop(i, translations); !next.ok()) self->Fail(next);
    }).detach();
    return;
  }
  part.translations = std::move(translations);
  bool last;
  {
    absl::MutexLock lock(&mu_);
    last = --parts_left_ == 0;
  }
  if (last) Respond();
}

// The second hop of a pivot: the first hop's best hypotheses, translated by the second model.
absl::Status TranslateRun::NextHop(size_t i, const std::vector<Translation>& first) {
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return absl::CancelledError("the call was cancelled");
  }
  Part& part = *parts_[i];
  v1::TranslateRequest request = part.routed.second;
  for (const Translation& t : first) {
    request.add_texts(t.hypotheses.empty() ? std::string() : t.hypotheses.front().text);
  }
  // The first model is not needed any more: released before the second may have to load (which
  // may unload it).
  part.p.reset();
  GLOSSA_RETURN_IF_ERROR(Prepare(context_, request, &part));
  part.second_hop = true;
  return Submit(i);
}

void TranslateRun::Fail(const absl::Status& status) {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
    for (const auto& part : parts_) {
      if (auto job = part->job.lock()) jobs.push_back(std::move(job));
    }
  }
  for (const auto& job : jobs) job->Cancel();
  done_(status);
}

void TranslateRun::Respond() {
  v1::TranslateResponse message;
  std::vector<v1::Translation> out(num_texts_);
  RpcRecord::Result sum;
  std::vector<std::string> routes;
  for (const auto& part : parts_) {
    for (size_t k = 0; k < part->routed.texts.size() && k < part->translations.size(); ++k) {
      ToProto(part->translations[k], part->p->return_scores, &out[part->routed.texts[k]]);
    }
    sum.input_tokens += part->result.input_tokens;
    sum.output_tokens += part->result.output_tokens;
    sum.untranslated += part->result.untranslated;
    sum.truncated += part->result.truncated;
    const std::string& route = part->routed.route.empty() ? part->p->model->name : part->routed.route;
    if (std::find(routes.begin(), routes.end(), route) == routes.end()) routes.push_back(route);
  }
  for (int i = 0; i < num_texts_; ++i) {
    if (i < static_cast<int>(detected_.size())) {
      out[i].set_detected_language(detected_[i].language);
      out[i].set_detected_confidence(static_cast<int>(detected_[i].confidence + 0.5));
    }
    *message.add_translations() = std::move(out[i]);
  }
  message.set_model(absl::StrJoin(routes, ","));
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
  }
  record_->SetResult(sum);
  done_(std::move(message));
}

}  // namespace glossa::server
