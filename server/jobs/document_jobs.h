// Documents from every front end (LibreTranslate's /translate_file, gRPC's TranslateDocument),
// translated on a bounded pool of worker threads of their own, never on the threads that serve
// /health, /translate or gRPC's calls. At most `max_jobs` are queued or running; what they hold
// is bounded by one MemoryBudget (the uploads, their inflated parts, segments, translations and
// the files written); each has a deadline (the caller's, and --document_timeout from its
// submission); each is cancelled when its caller asks (a client that went away) and when the
// server stops. Finished results go to the caller's callback and are not kept.
#ifndef GLOSSA_SERVER_JOBS_DOCUMENT_JOBS_H_
#define GLOSSA_SERVER_JOBS_DOCUMENT_JOBS_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/jobs/memory_budget.h"
#include "server/jobs/document_translator.h"

namespace glossa::server {

enum class DocumentState { kQueued, kTranslating, kFinished };

// One submitted document, as its caller sees it while it runs.
class DocumentTicket {
 public:
  // The document ends with CANCELLED: at once while queued, within 50 ms and one decoder step
  // while translated.
  void Cancel() { progress_.cancelled.store(true); }
  DocumentState state() const { return state_.load(); }
  int64_t segments_done() const { return progress_.segments_done.load(); }
  int64_t segments_total() const { return progress_.segments_total.load(); }

 private:
  friend class DocumentJobs;
  DocumentProgress progress_;
  std::atomic<DocumentState> state_{DocumentState::kQueued};
};

struct DocumentJobsOptions {
  int workers = 2;                     // documents translated at once
  int max_jobs = 8;                    // queued or translated at once; more: RESOURCE_EXHAUSTED
  int64_t memory_bytes = 512 << 20;    // what they hold, together (estimated)
};

class DocumentJobs {
 public:
  using Done = std::function<void(absl::StatusOr<TranslatedDocument>)>;

  // Starts the workers. `translator` must outlive this.
  DocumentJobs(const DocumentTranslator* translator, DocumentJobsOptions options);
  // Shutdown(now): queued documents fail, running ones are cancelled.
  ~DocumentJobs();
  DocumentJobs(const DocumentJobs&) = delete;
  DocumentJobs& operator=(const DocumentJobs&) = delete;

  // Queues `job`; `done` is called once, on a worker thread or in Shutdown, with the result.
  // `record` is told the model and must outlive that call. RESOURCE_EXHAUSTED when max_jobs are in already or the budget cannot hold the upload,
  // INVALID_ARGUMENT when the upload alone is over the budget, UNAVAILABLE once stopping:
  // `done` is then not called.
  absl::StatusOr<std::shared_ptr<DocumentTicket>> Submit(DocumentJob job, absl::Time deadline,
                                                         RpcRecord* record, Done done);

  // Refuses new documents and fails the queued ones (UNAVAILABLE); lets the running ones go on
  // until `deadline`, then cancels them; returns once every worker has ended.
  void Shutdown(absl::Time deadline);

  struct Counts {
    int queued = 0;
    int running = 0;
    int64_t memory_bytes = 0;  // held by documents in flight, as estimated
  };
  Counts counts() const;
  int64_t memory_limit() const { return memory_.limit(); }

 private:
  struct Entry {
    std::shared_ptr<DocumentTicket> ticket;
    DocumentJob job;
    absl::Time deadline;
    RpcRecord* record = nullptr;
    Done done;
    MemoryBudget::Reservation memory;
  };

  void Work();
  absl::StatusOr<TranslatedDocument> Run(Entry& entry);

  const DocumentTranslator* translator_;
  const DocumentJobsOptions options_;
  MemoryBudget memory_;
  mutable absl::Mutex mu_;
  std::deque<std::unique_ptr<Entry>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<DocumentTicket>> running_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

// Submits `job` and waits for its result, cancelling it once `client_gone` (optional, asked
// every 200 ms) says the caller went away; returns only when the document has ended, so
// `record` may live on the caller's stack.
absl::StatusOr<TranslatedDocument> TranslateWaiting(DocumentJobs& jobs, DocumentJob job,
                                                    absl::Time deadline, RpcRecord* record,
                                                    const std::function<bool()>& client_gone);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_JOBS_DOCUMENT_JOBS_H_
