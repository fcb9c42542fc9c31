// One unary translation, transport-neutral: the request routed (server/request/routing.h) into
// parts, each part a job on its model's engine, or two jobs one after the other through a pivot
// language; the response is built once every part has ended, its translations in the request's
// order.
#ifndef GLOSSA_SERVER_GRPC_TRANSLATE_RUN_H_
#define GLOSSA_SERVER_GRPC_TRANSLATE_RUN_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "glossa/v1/translator.pb.h"
#include "server/cache/result_cache.h"
#include "server/metrics/metrics.h"
#include "server/models/model_registry.h"
#include "server/request/glossary_cache.h"
#include "server/request/request.h"
#include "server/request/routing.h"

namespace glossa::server {

// What a run reads from the service.
struct RunContext {
  const ModelRegistry* registry = nullptr;
  RequestLimits limits;
  const GlossaryCache* glossaries = nullptr;  // null: none
  ResultCache* cache = nullptr;               // null: none
  std::string pivot_language;                 // empty: no pivot
};

// The engine job of a prepared request (its sources, search, constraints and lane).
std::shared_ptr<Job> NewJob(const PreparedRequest& p, absl::Time deadline);

// What a successful translation adds to the request metrics: source tokens (EOS included, as
// the engine counts them), generated tokens of each best hypothesis (EOS excluded), the
// non-empty texts whose translation is the text itself (untranslated), and the best hypotheses
// that reached the length limit (truncated).
RpcRecord::Result ResultOf(const PreparedRequest& p, const std::vector<std::string>& texts,
                           const std::vector<Translation>& translations);

class TranslateRun : public std::enable_shared_from_this<TranslateRun> {
 public:
  using Done = std::function<void(absl::StatusOr<v1::TranslateResponse>)>;
  // Routes and validates `request`; nothing runs until Start. `record` (which must outlive the
  // run until `done`) gets the result on success; the caller finishes it.
  static absl::StatusOr<std::shared_ptr<TranslateRun>> Create(const RunContext& context,
                                                              const v1::TranslateRequest& request,
                                                              absl::Time deadline,
                                                              RpcRecord* record, Done done);
  // Submits the jobs. When it fails, `done` is never called; otherwise `done` is called once
  // (maybe before Start returns).
  absl::Status Start();
  // Stops the jobs within a decoder step; `done` gets their CANCELLED.
  void Cancel();

  struct Part;  // one part's state (translate_run.cc)

 private:
  TranslateRun() = default;
  absl::Status Submit(size_t part);
  void PartDone(size_t part, JobResult result);
  absl::Status NextHop(size_t part, const std::vector<Translation>& first);
  void Fail(const absl::Status& status);
  void Respond();

  RunContext context_;
  absl::Time deadline_;
  RpcRecord* record_ = nullptr;
  Done done_;
  std::vector<DetectedLanguage> detected_;
  int num_texts_ = 0;
  std::vector<std::unique_ptr<Part>> parts_;
  absl::Mutex mu_;
  size_t parts_left_ ABSL_GUARDED_BY(mu_) = 0;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // done called, or Start failed
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_GRPC_TRANSLATE_RUN_H_
