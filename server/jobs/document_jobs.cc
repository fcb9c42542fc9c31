#include "server/jobs/document_jobs.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace glossa::server {

DocumentJobs::DocumentJobs(const DocumentTranslator* translator, DocumentJobsOptions options)
    : translator_(translator),
      options_(options),
      memory_(options.memory_bytes, "--document_memory_mb") {
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    workers_.emplace_back([this] { Work(); });
  }
}

DocumentJobs::~DocumentJobs() { Shutdown(absl::Now()); }

absl::StatusOr<std::shared_ptr<DocumentTicket>> DocumentJobs::Submit(DocumentJob job,
                                                                     absl::Time deadline,
                                                                     RpcRecord* record,
                                                                     Done done) {
  auto entry = std::make_unique<Entry>();
  entry->ticket = std::make_shared<DocumentTicket>();
  entry->deadline =
      std::min(deadline, absl::Now() + translator_->options().document_timeout);
  entry->record = record;
  entry->done = std::move(done);
  entry->memory = memory_.Start();
  // The upload, held twice while its request lives (the message, and the job's copy).
  if (absl::Status held = entry->memory.Grow(2 * static_cast<int64_t>(job.bytes.size()));
      !held.ok()) {
    return held;
  }
  entry->job = std::move(job);
  std::shared_ptr<DocumentTicket> ticket = entry->ticket;
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  const int in = static_cast<int>(queue_.size() + running_.size());
  if (in >= options_.max_jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server has ", in, " documents queued or in translation, its limit "
        "(--max_documents): try again later"));
  }
  queue_.push_back(std::move(entry));
  return ticket;
}

void DocumentJobs::Work() {
  for (;;) {
    std::unique_ptr<Entry> entry;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](DocumentJobs* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return self->stopping_ || !self->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping
      entry = std::move(queue_.front());
      queue_.pop_front();
      running_.push_back(entry->ticket);
    }
    entry->ticket->state_.store(DocumentState::kTranslating);
    absl::StatusOr<TranslatedDocument> result = Run(*entry);
    entry->memory.Release();
    {
      absl::MutexLock lock(&mu_);
      running_.erase(std::find(running_.begin(), running_.end(), entry->ticket));
    }
    entry->ticket->state_.store(DocumentState::kFinished);
    entry->done(std::move(result));
  }
}

absl::StatusOr<TranslatedDocument> DocumentJobs::Run(Entry& entry) {
  if (entry.ticket->progress_.cancelled.load()) {
    return absl::CancelledError("the document was cancelled before it started");
  }
  if (absl::Now() >= entry.deadline) {
    return absl::DeadlineExceededError(
        "the document's deadline passed while it waited for a worker (--document_timeout, or "
        "the call's deadline)");
  }
  try {  // a worker thread: an exception must fail the document, not end the process
    return translator_->Translate(entry.job, entry.deadline, entry.record,
                                  &entry.ticket->progress_, &entry.memory);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("the document failed: ", e.what()));
  }
}

void DocumentJobs::Shutdown(absl::Time deadline) {
  std::deque<std::unique_ptr<Entry>> queued;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
    queued.swap(queue_);
  }
  for (auto& entry : queued) {
    entry->ticket->state_.store(DocumentState::kFinished);
    entry->done(absl::UnavailableError("the server is shutting down: the document was not "
                                       "started"));
  }
  {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithDeadline(absl::Condition(
                              +[](DocumentJobs* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                return self->running_.empty();
                              },
                              this),
                          deadline);
    for (auto& ticket : running_) ticket->Cancel();
  }
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
}

DocumentJobs::Counts DocumentJobs::counts() const {
  absl::MutexLock lock(&mu_);
  return {static_cast<int>(queue_.size()), static_cast<int>(running_.size()), memory_.used()};
}

absl::StatusOr<TranslatedDocument> TranslateWaiting(DocumentJobs& jobs, DocumentJob job,
                                                    absl::Time deadline, RpcRecord* record,
                                                    const std::function<bool()>& client_gone) {
  struct Waiter {
    absl::Notification done;
    absl::StatusOr<TranslatedDocument> result = absl::UnknownError("no result");
  };
  auto waiter = std::make_shared<Waiter>();
  auto ticket = jobs.Submit(std::move(job), deadline, record,
                            [waiter](absl::StatusOr<TranslatedDocument> result) {
                              waiter->result = std::move(result);
                              waiter->done.Notify();
                            });
  if (!ticket.ok()) return ticket.status();
  while (!waiter->done.WaitForNotificationWithTimeout(absl::Milliseconds(200))) {
    if (client_gone && client_gone()) (*ticket)->Cancel();
  }
  return std::move(waiter->result);
}

}  // namespace glossa::server
