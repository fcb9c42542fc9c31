// Prometheus metrics of glossa-server (DESIGN.md §6), served on --metrics_listen at /metrics.
//
// Two sources, both read at scrape time by one prometheus::Collectable (MetricsCollector):
//  - each engine's own lock-free metrics (runtime/engine/metrics.h) and gauges
//    (Engine::stats()), labelled with `model`;
//  - request metrics that the service records here (RequestMetrics, through one RpcRecord per
//    RPC), labelled with `model`, `method` and `code`, and the request count also with `client`.
// Recording is a few relaxed atomic adds: every {model, method} series is allocated up front, so
// nothing is looked up or locked. That matters because an RPC often ends on an engine worker
// thread (inside the job's on_done), i.e. in the decode loop. prometheus-cpp's own Counter and
// Histogram are deliberately not used: Histogram::Observe and the scrape share a mutex. A scrape
// reads atomics and /proc only; it never waits for a step loop, and nothing is ever reset.
//
// The `model` label is the name of a loaded model, or "" when a request names none that is
// loaded (NOT_FOUND, an empty name with several models, an unparsable request) and for
// ListModels. Unknown names are not used as labels: clients could otherwise create series
// without bound. The `client` label is the name of an --auth_token_file client, or "anonymous"
// for a request that presented no client's token: only the configured names, never a token.
#ifndef GLOSSA_SERVER_METRICS_METRICS_H_
#define GLOSSA_SERVER_METRICS_METRICS_H_

#include <grpcpp/support/status.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "engine/metrics.h"
#include "server/models/model_registry.h"
#include "server/cache/result_cache.h"

namespace prometheus {
class Exposer;
}

namespace glossa::server {

// gRPC's methods, then the HTTP API's routes (server/http_api/http_api.h), labelled by their path.
enum class Method {
  kTranslate = 0,
  kTranslateStream = 1,
  kListModels = 2,
  kHttpTranslate = 3,    // LibreTranslate's POST /translate
  kHttpV1Translate = 4,  // POST /v1/translate
  kHttpV1Models = 5,     // GET /v1/models
  kHttpLanguages = 6,    // LibreTranslate's GET /languages
  kHttpDetect = 7,       // LibreTranslate's POST /detect
  // LibreTranslate's POST /translate_file: one file in several translation requests, so its
  // series count files and their duration, not tokens.
  kHttpTranslateFile = 8,
  kTranslateDocument = 9,  // gRPC's file translation: counted as /translate_file is
  kHttpV2Translate = 10,   // DeepL's POST /v2/translate
};
inline constexpr int kNumMethods = 11;
// Methods that translate (they have token counts), and those of gRPC (their series exist at 0
// from the start, as dashboards expect).
bool IsTranslation(Method method);
bool IsGrpc(Method method);
inline constexpr int kNumStatusCodes = 17;  // grpc::StatusCode OK (0) .. UNAUTHENTICATED (16)

// The `method` label: "Translate", "TranslateStream", "ListModels", "TranslateDocument", or the
// HTTP path
// ("/translate", "/v1/translate", "/v1/models", "/languages", "/detect", "/translate_file",
// "/v2/translate").
const char* MethodName(Method method);
// The `code` label: the gRPC status code's name, "OK", "INVALID_ARGUMENT", ...
const char* StatusCodeName(grpc::StatusCode code);

// Per-RPC counters and histograms for every {model label, method}, recorded without locks.
class RequestMetrics {
 public:
  using Codes = std::array<std::atomic<uint64_t>, kNumStatusCodes>;  // by status code
  struct Series {
    explicit Series(int clients);
    std::vector<Codes> requests;      // by client id, then status code
    AtomicHistogram duration_seconds;                               // every finished RPC
    AtomicHistogram input_tokens;   // successful translations: source tokens, EOS included
    AtomicHistogram output_tokens;  // successful translations: best hypotheses, EOS excluded
    std::atomic<uint64_t> untranslated{0};  // texts whose translation equals the text
    std::atomic<uint64_t> truncated{0};     // texts whose best hypothesis hit the length limit
    std::atomic<uint64_t> pivoted{0};  // successful translations through a pivot language
  };

  // model_names: the loaded models; label 0 is "" (see the file comment). client_names: the
  // `client` labels by client id, [0] the anonymous client's (ClientTokens::names(); empty:
  // "anonymous" only).
  explicit RequestMetrics(const std::vector<std::string>& model_names,
                          std::vector<std::string> client_names = {});

  // The models served now, when they change (--model_config): names not seen before get their
  // series (labels are never taken away: counters do not go back), and an empty model name
  // resolves to the only one of `loaded`. At most kMaxModelLabels names ever get a label;
  // later ones are counted under "".
  void SetLoaded(const std::vector<std::string>& loaded);
  static constexpr int kMaxModelLabels = 256;

  // The label index for the model a request names: an empty name resolves to the only model.
  int ModelLabel(absl::string_view requested) const;
  // Every label so far, "" first (a copy: labels may be added meanwhile).
  std::vector<std::string> model_labels() const;
  // One label, by index (< the number of labels so far).
  const std::string& model_label(int index) const { return labels_[index]; }
  Series& series(int model_label, Method method);
  const Series& series(int model_label, Method method) const;
  const std::vector<std::string>& client_labels() const { return clients_; }

  // Writes one line per finished request to stderr (--log_requests): its method, model label,
  // client, status code and duration; never a text or a token.
  void SetLogRequests(bool log) { log_requests_ = log; }
  bool log_requests() const { return log_requests_; }

 private:
  int AddLabelLocked(const std::string& name);
  // Written once each, before num_labels_ publishes them; read without a lock.
  std::array<std::string, kMaxModelLabels + 1> labels_;
  std::array<std::unique_ptr<Series>, (kMaxModelLabels + 1) * kNumMethods> series_;
  std::atomic<int> num_labels_{0};
  std::atomic<int> only_label_{0};  // the label of an empty model name: the only model, or 0
  absl::Mutex add_mu_;             // serializes SetLoaded
  std::vector<std::string> clients_;  // set once, by the constructor
  bool log_requests_ = false;         // set before the first request
};

// One RPC's outcome. The reactor creates it when the call starts (the clock starts), tells it
// the model and, on success, what was translated, and calls Finish() where it finishes the RPC:
// the single place where a request is counted (a second Finish is ignored).
class RpcRecord {
 public:
  RpcRecord(RequestMetrics* metrics, Method method);
  void SetModel(absl::string_view requested);
  // The client the request authenticated as (its id, ClientTokens::Find); 0: anonymous.
  void SetClient(int client) { client_ = client; }
  int client() const { return client_; }
  // What a successful translation produced. Recorded by Finish(), and only if the status is OK.
  struct Result {
    int64_t input_tokens = 0;   // source tokens, end of sentence included
    int64_t output_tokens = 0;  // best hypotheses, end of sentence excluded
    int64_t untranslated = 0;   // non-empty texts whose translation is the text
    int64_t truncated = 0;      // texts whose best hypothesis reached max_output_tokens
  };
  void SetResult(const Result& result);
  // The translation went through a pivot language (its model is the first hop's).
  void SetPivoted() { pivoted_ = true; }
  void Finish(const grpc::Status& status);

 private:
  void LogRequest(int client, grpc::StatusCode code, double seconds) const;

  RequestMetrics* metrics_;
  Method method_;
  std::chrono::steady_clock::time_point start_;
  int model_label_ = 0;
  int client_ = 0;
  bool has_result_ = false;
  bool pivoted_ = false;
  Result result_;
  std::atomic<bool> finished_{false};
};

struct BuildInfo {
  std::string version;
  std::string git_sha;
};

// The document jobs' state (server/jobs/ is a room above this one), read at scrape time.
struct DocumentGauges {
  int queued = 0;
  int running = 0;
  int64_t memory_bytes = 0;        // held by the documents in flight, as estimated
  int64_t memory_limit_bytes = 0;  // --document_memory_mb
};

// Builds the exposition at scrape time from the engines, the request metrics and /proc.
class MetricsCollector final : public prometheus::Collectable {
 public:
  // Both must outlive the collector.
  MetricsCollector(const ModelRegistry* registry, const RequestMetrics* requests, BuildInfo build);
  std::vector<prometheus::MetricFamily> Collect() const override;
  // The result cache whose counters to export (null: none). Must outlive the collector.
  void SetCache(const ResultCache* cache) { cache_ = cache; }
  // Where the document jobs' gauges come from (unset: none exported).
  void SetDocuments(std::function<DocumentGauges()> documents) {
    documents_ = std::move(documents);
  }

 private:
  void CollectRequests(std::vector<prometheus::MetricFamily>* out) const;
  void CollectEngines(std::vector<prometheus::MetricFamily>* out) const;
  void CollectProcess(std::vector<prometheus::MetricFamily>* out) const;
  void CollectCache(std::vector<prometheus::MetricFamily>* out) const;
  void CollectDocuments(std::vector<prometheus::MetricFamily>* out) const;
  void CollectModels(std::vector<prometheus::MetricFamily>* out) const;
  void CollectResidency(std::vector<prometheus::MetricFamily>* out) const;

  const ModelRegistry* registry_;
  const RequestMetrics* requests_;
  const ResultCache* cache_ = nullptr;
  std::function<DocumentGauges()> documents_;
  BuildInfo build_;
  double start_time_seconds_ = 0;  // process_start_time_seconds, read once
};

// The HTTP endpoint (prometheus-cpp's Exposer): GET /metrics.
class MetricsServer {
 public:
  // address: HOST:PORT (port 0 picks a free one). Fails when it cannot listen there.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& address, std::shared_ptr<prometheus::Collectable> collectable);
  ~MetricsServer();
  int port() const { return port_; }

 private:
  MetricsServer() = default;
  std::shared_ptr<prometheus::Collectable> collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_METRICS_METRICS_H_
