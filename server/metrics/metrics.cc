#include "server/metrics/metrics.h"

#include <dirent.h>
#include <prometheus/exposer.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace glossa::server {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

constexpr const char* kStatusCodeNames[kNumStatusCodes] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

int CodeIndex(grpc::StatusCode code) {
  const int i = static_cast<int>(code);
  return i >= 0 && i < kNumStatusCodes ? i : static_cast<int>(grpc::StatusCode::UNKNOWN);
}

// Most tokens one request can carry (256 texts × 512 tokens), for the per-request buckets.
constexpr double kMaxRequestTokens = 131072;

MetricFamily Family(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

ClientMetric::Histogram ToHistogram(const AtomicHistogram::Snapshot& s) {
  ClientMetric::Histogram h;
  h.sample_count = s.count;
  h.sample_sum = s.sum;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < s.counts.size(); ++i) {  // per-bucket counts -> Prometheus' cumulative
    cumulative += s.counts[i];
    h.bucket.push_back(
        {cumulative, i < s.bounds.size() ? s.bounds[i] : std::numeric_limits<double>::infinity()});
  }
  return h;
}

void AddHistogram(MetricFamily* f, std::vector<ClientMetric::Label> labels,
                  const AtomicHistogram& histogram) {
  ClientMetric m;
  m.label = std::move(labels);
  m.histogram = ToHistogram(histogram.Read());
  f->metric.push_back(std::move(m));
}

void AddValue(MetricFamily* f, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  if (f->type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f->metric.push_back(std::move(m));
}

// The fields of /proc/self/stat after the command name (field 3, the state, is [0]).
std::vector<std::string> ProcSelfStat() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  const size_t end_of_name = line.rfind(')');
  std::vector<std::string> fields;
  if (end_of_name == std::string::npos) return fields;
  std::istringstream rest(line.substr(end_of_name + 1));
  for (std::string field; rest >> field;) fields.push_back(field);
  return fields;
}

double StatField(const std::vector<std::string>& fields, int number) {  // 1-based, as in proc(5)
  const size_t i = static_cast<size_t>(number - 3);
  return i < fields.size() ? std::strtod(fields[i].c_str(), nullptr) : 0.0;
}

double BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "btime") {
      double value = 0;
      in >> value;
      return value;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

int OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  int n = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n - 1;  // the directory stream itself
}

}  // namespace

const char* MethodName(Method method) {
  switch (method) {
    case Method::kTranslate:
      return "Translate";
    case Method::kTranslateStream:
      return "TranslateStream";
    case Method::kListModels:
      return "ListModels";
    case Method::kHttpTranslate:
      return "/translate";
    case Method::kHttpV1Translate:
      return "/v1/translate";
    case Method::kHttpV1Models:
      return "/v1/models";
    case Method::kHttpLanguages:
      return "/languages";
    case Method::kHttpDetect:
      return "/detect";
    case Method::kHttpTranslateFile:
      return "/translate_file";
    case Method::kTranslateDocument:
      return "TranslateDocument";
    case Method::kHttpV2Translate:
      return "/v2/translate";
  }
  return "";
}

bool IsTranslation(Method method) {
  return method == Method::kTranslate || method == Method::kTranslateStream ||
         method == Method::kHttpTranslate || method == Method::kHttpV1Translate ||
         method == Method::kHttpV2Translate;
}

bool IsGrpc(Method method) { return static_cast<int>(method) <= 2; }

const char* StatusCodeName(grpc::StatusCode code) { return kStatusCodeNames[CodeIndex(code)]; }

RequestMetrics::Series::Series(int clients)
    : requests(static_cast<size_t>(std::max(1, clients))),
      duration_seconds(AtomicHistogram::SecondsBounds()),
      input_tokens(AtomicHistogram::CountBounds(kMaxRequestTokens)),
      output_tokens(AtomicHistogram::CountBounds(kMaxRequestTokens)) {}

RequestMetrics::RequestMetrics(const std::vector<std::string>& model_names,
                               std::vector<std::string> client_names)
    : clients_(std::move(client_names)) {
  if (clients_.empty()) clients_.push_back("anonymous");
  absl::MutexLock lock(&add_mu_);
  AddLabelLocked("");
  for (const std::string& name : model_names) AddLabelLocked(name);
  only_label_.store(model_names.size() == 1 ? 1 : 0);
}

int RequestMetrics::AddLabelLocked(const std::string& name) {
  const int n = num_labels_.load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i) {
    if (labels_[i] == name) return i;
  }
  if (n > kMaxModelLabels) return 0;
  labels_[n] = name;
  const int clients = static_cast<int>(clients_.size());
  for (int m = 0; m < kNumMethods; ++m) {
    series_[n * kNumMethods + m] = std::make_unique<Series>(clients);
  }
  num_labels_.store(n + 1, std::memory_order_release);
  return n;
}

void RequestMetrics::SetLoaded(const std::vector<std::string>& loaded) {
  absl::MutexLock lock(&add_mu_);
  int only = 0;
  for (const std::string& name : loaded) only = AddLabelLocked(name);
  only_label_.store(loaded.size() == 1 ? only : 0, std::memory_order_release);
}

std::vector<std::string> RequestMetrics::model_labels() const {
  const int n = num_labels_.load(std::memory_order_acquire);
  return std::vector<std::string>(labels_.begin(), labels_.begin() + n);
}

int RequestMetrics::ModelLabel(absl::string_view requested) const {
  // The only model, or ambiguous.
  if (requested.empty()) return only_label_.load(std::memory_order_acquire);
  const int n = num_labels_.load(std::memory_order_acquire);
  for (int i = 1; i < n; ++i) {
    if (labels_[i] == requested) return i;
  }
  return 0;
}

RequestMetrics::Series& RequestMetrics::series(int model_label, Method method) {
  return *series_[model_label * kNumMethods + static_cast<int>(method)];
}

const RequestMetrics::Series& RequestMetrics::series(int model_label, Method method) const {
  return *series_[model_label * kNumMethods + static_cast<int>(method)];
}

RpcRecord::RpcRecord(RequestMetrics* metrics, Method method)
    : metrics_(metrics), method_(method), start_(std::chrono::steady_clock::now()) {}

void RpcRecord::SetModel(absl::string_view requested) {
  if (metrics_ != nullptr) model_label_ = metrics_->ModelLabel(requested);
}

void RpcRecord::SetResult(const Result& result) {
  has_result_ = true;
  result_ = result;
}

void RpcRecord::LogRequest(int client, grpc::StatusCode code, double seconds) const {
  const std::string& model = metrics_->model_label(model_label_);
  // Every field is the server's own: a method, a configured model or client name, a code.
  const std::string line = absl::StrCat(
      "glossa-server: request method=", MethodName(method_), " model=",
      model.empty() ? "-" : model, " client=", metrics_->client_labels()[client],
      " code=", StatusCodeName(code), " ms=", absl::StrFormat("%.1f", seconds * 1000), "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);  // one write: lines do not interleave
}

void RpcRecord::Finish(const grpc::Status& status) {
  if (metrics_ == nullptr || finished_.exchange(true)) return;
  RequestMetrics::Series& s = metrics_->series(model_label_, method_);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
  const int client = client_ > 0 && client_ < static_cast<int>(s.requests.size()) ? client_ : 0;
  s.requests[client][CodeIndex(status.error_code())].fetch_add(1, std::memory_order_relaxed);
  s.duration_seconds.Observe(elapsed.count());
  if (metrics_->log_requests()) LogRequest(client, status.error_code(), elapsed.count());
  if (status.ok() && has_result_) {
    s.input_tokens.Observe(static_cast<double>(result_.input_tokens));
    s.output_tokens.Observe(static_cast<double>(result_.output_tokens));
    s.untranslated.fetch_add(result_.untranslated, std::memory_order_relaxed);
    s.truncated.fetch_add(result_.truncated, std::memory_order_relaxed);
    if (pivoted_) s.pivoted.fetch_add(1, std::memory_order_relaxed);
  }
}

MetricsCollector::MetricsCollector(const ModelRegistry* registry, const RequestMetrics* requests,
                                   BuildInfo build)
    : registry_(registry), requests_(requests), build_(std::move(build)) {
  start_time_seconds_ =
      BootTimeSeconds() + StatField(ProcSelfStat(), 22) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::vector<MetricFamily> MetricsCollector::Collect() const {
  std::vector<MetricFamily> out;
  CollectRequests(&out);
  CollectEngines(&out);
  CollectProcess(&out);
  CollectCache(&out);
  CollectDocuments(&out);
  CollectModels(&out);
  return out;
}

void MetricsCollector::CollectModels(std::vector<MetricFamily>* out) const {
  const ModelRegistry::ReloadStats s = registry_->reload_stats();
  auto loaded = Family("glossa_models_loaded", "Models served now.", MetricType::Gauge);
  AddValue(&loaded, {}, static_cast<double>(registry_->models().size()));
  auto retiring = Family("glossa_models_retiring",
                         "Models removed or replaced by a --model_config reload whose in-flight "
                         "requests have not all finished (they are unloaded then).",
                         MetricType::Gauge);
  AddValue(&retiring, {}, static_cast<double>(s.retiring));
  auto reloads = Family("glossa_model_reloads_total",
                        "Reloads of --model_config (SIGHUP or a change): ok, or failed (the file "
                        "could not be read or parsed, or a model in it failed to load).",
                        MetricType::Counter);
  AddValue(&reloads, {{"result", "ok"}}, static_cast<double>(s.reloads_ok));
  AddValue(&reloads, {{"result", "failed"}}, static_cast<double>(s.reloads_failed));
  auto last = Family("glossa_model_config_last_reload_successful",
                     "1 when the last --model_config reload applied everything (or none ran), "
                     "0 when it failed in whole or in part.",
                     MetricType::Gauge);
  AddValue(&last, {}, s.last_reload_ok ? 1 : 0);
  auto failures = Family("glossa_model_load_failures_total",
                         "Models that failed to load in a --model_config reload, by name (the "
                         "model served before, if any, kept serving).",
                         MetricType::Counter);
  for (const auto& [name, n] : s.load_failures) {
    AddValue(&failures, {{"model", name}}, static_cast<double>(n));
  }
  for (auto* f : {&loaded, &retiring, &reloads, &last, &failures}) out->push_back(std::move(*f));
  CollectResidency(out);
}

namespace {

// One sample per reason, 0 for the reasons that have not happened yet.
void AddByReason(MetricFamily* f, const std::map<std::string, uint64_t>& counts,
                 std::initializer_list<const char*> reasons) {
  for (const char* reason : reasons) {
    auto it = counts.find(reason);
    AddValue(f, {{"reason", reason}}, it == counts.end() ? 0.0 : static_cast<double>(it->second));
  }
}

}  // namespace

void MetricsCollector::CollectResidency(std::vector<MetricFamily>* out) const {
  const ModelRegistry::ResidencyStats s = registry_->residency_stats();
  auto catalogued = Family("glossa_models_catalogued",
                           "Models served, loaded or not (a catalogued model loads on its first "
                           "request).",
                           MetricType::Gauge);
  AddValue(&catalogued, {}, static_cast<double>(s.catalogued));
  auto bytes = Family("glossa_models_loaded_bytes",
                      "Estimated memory of the loaded models (weights in their compute type and "
                      "the KV cache their engines hold): what --max_loaded_mb bounds.",
                      MetricType::Gauge);
  AddValue(&bytes, {}, static_cast<double>(s.loaded_bytes));
  auto budget = Family("glossa_models_budget_bytes",
                       "The memory budget of the loaded models (--max_loaded_mb); 0: none.",
                       MetricType::Gauge);
  AddValue(&budget, {}, static_cast<double>(registry_->budget()));
  auto loads = Family("glossa_model_loads_total",
                      "Models loaded, by reason: start, request (a catalogued model's first "
                      "request, or its first after an unload), reload (--model_config).",
                      MetricType::Counter);
  AddByReason(&loads, s.loads, {"start", "request", "reload"});
  auto unloads = Family("glossa_model_unloads_total",
                        "Models unloaded, by reason: budget (least recently used, to make room "
                        "under --max_loaded_mb), removed or replaced (--model_config).",
                        MetricType::Counter);
  AddByReason(&unloads, s.unloads, {"budget", "removed", "replaced"});
  auto cold = Family("glossa_model_cold_start_seconds",
                     "Time to load a model (read, convert to its compute type, start its "
                     "engine), unloading others aside.",
                     MetricType::Histogram);
  AddHistogram(&cold, {}, registry_->cold_start_seconds());
  auto waited = Family("glossa_requests_waited_for_load_total",
                       "Requests that found their model not loaded and waited for its load.",
                       MetricType::Counter);
  AddValue(&waited, {}, static_cast<double>(s.waited_for_load));
  for (auto* f : {&catalogued, &bytes, &budget, &loads, &unloads, &cold, &waited}) {
    out->push_back(std::move(*f));
  }
}

void MetricsCollector::CollectCache(std::vector<MetricFamily>* out) const {
  if (cache_ == nullptr) return;
  const ResultCache::Stats s = cache_->stats();
  const struct {
    const char* name;
    const char* help;
    MetricType type;
    double value;
  } kSeries[] = {
      {"glossa_cache_hits_total", "Texts answered from the result cache.", MetricType::Counter,
       static_cast<double>(s.hits)},
      {"glossa_cache_misses_total", "Texts looked up in the result cache and not found.",
       MetricType::Counter, static_cast<double>(s.misses)},
      {"glossa_cache_evictions_total", "Entries the result cache dropped to stay within its bytes.",
       MetricType::Counter, static_cast<double>(s.evictions)},
      {"glossa_cache_bytes", "Bytes the result cache holds.", MetricType::Gauge,
       static_cast<double>(s.bytes)},
      {"glossa_cache_entries", "Translations the result cache holds.", MetricType::Gauge,
       static_cast<double>(s.entries)},
      {"glossa_cache_capacity_bytes", "The result cache's bound (--cache_bytes).",
       MetricType::Gauge, static_cast<double>(s.capacity_bytes)},
  };
  for (const auto& series : kSeries) {
    auto family = Family(series.name, series.help, series.type);
    AddValue(&family, {}, series.value);
    out->push_back(std::move(family));
  }
}

void MetricsCollector::CollectDocuments(std::vector<MetricFamily>* out) const {
  if (!documents_) return;
  const DocumentGauges g = documents_();
  const struct {
    const char* name;
    const char* help;
    double value;
  } kSeries[] = {
      {"glossa_documents_queued", "Documents waiting for a worker (--document_workers).",
       static_cast<double>(g.queued)},
      {"glossa_documents_running", "Documents being translated.", static_cast<double>(g.running)},
      {"glossa_documents_memory_bytes",
       "Bytes the documents in flight hold, as estimated (uploads, inflated parts, segments, "
       "translations, files written).",
       static_cast<double>(g.memory_bytes)},
      {"glossa_documents_memory_limit_bytes", "Their bound (--document_memory_mb).",
       static_cast<double>(g.memory_limit_bytes)},
  };
  for (const auto& series : kSeries) {
    auto family = Family(series.name, series.help, MetricType::Gauge);
    AddValue(&family, {}, series.value);
    out->push_back(std::move(family));
  }
}

namespace {

// glossa_requests_total's samples of one {model, method} series: one per client and code that
// has requests. `expected`: the OK sample that dashboards expect from the start exists at 0, for
// each named client when tokens are required, else for the anonymous one. False: none added.
bool AddRequestCounts(MetricFamily* f, const std::vector<ClientMetric::Label>& labels,
                      const RequestMetrics::Series& s, const std::vector<std::string>& clients,
                      bool expected) {
  const size_t first_expected = clients.size() > 1 ? 1 : 0;
  bool any = false;
  for (size_t client = 0; client < s.requests.size() && client < clients.size(); ++client) {
    for (int code = 0; code < kNumStatusCodes; ++code) {
      const uint64_t n = s.requests[client][code].load(std::memory_order_relaxed);
      if (n == 0 && !(expected && code == 0 && client >= first_expected)) continue;
      any = true;
      std::vector<ClientMetric::Label> with = {{"client", clients[client]},
                                               {"code", kStatusCodeNames[code]}};
      with.insert(with.end(), labels.begin(), labels.end());
      AddValue(f, std::move(with), static_cast<double>(n));
    }
  }
  return any;
}

}  // namespace

void MetricsCollector::CollectRequests(std::vector<MetricFamily>* out) const {
  auto requests = Family("glossa_requests_total",
                         "RPCs finished, by client, model, method and gRPC status code. model is "
                         "\"\" when the request names no loaded model, and for ListModels; "
                         "client is an --auth_token_file client's name, or \"anonymous\".",
                         MetricType::Counter);
  auto duration =
      Family("glossa_request_duration_seconds",
             "Time from the start of an RPC to its final status.", MetricType::Histogram);
  auto input = Family("glossa_request_input_tokens",
                      "Source tokens per successful translation request (all its texts, end of "
                      "sentence included).",
                      MetricType::Histogram);
  auto output = Family("glossa_request_output_tokens",
                       "Generated tokens per successful translation request (best hypothesis of "
                       "each text, end of sentence excluded).",
                       MetricType::Histogram);
  auto untranslated =
      Family("glossa_untranslated_total",
             "Non-empty texts whose translation is identical to the text (surrounding "
             "whitespace ignored): the model copied its input.",
             MetricType::Counter);
  // Counted here rather than by the engine: Marian models force </s> at the last allowed step,
  // so a cut output still ends with </s>; the server knows the limit each request ran with.
  auto truncated = Family("glossa_truncated_total",
                          "Texts whose best hypothesis reached the output length limit "
                          "(max_output_tokens, or the server's or model's limit): cut short, or "
                          "ended by a forced end of sentence.",
                          MetricType::Counter);
  auto pivoted = Family("glossa_pivot_requests_total",
                        "Successful translation requests that went through the pivot language "
                        "(--pivot_language), by the model of their first hop.",
                        MetricType::Counter);
  const std::vector<std::string> models = requests_->model_labels();
  for (int model = 0; model < static_cast<int>(models.size()); ++model) {
    for (int m = 0; m < kNumMethods; ++m) {
      const Method method = static_cast<Method>(m);
      const bool translation = IsTranslation(method);
      // The series every dashboard expects exist from the start (at 0); the others appear with
      // their first request.
      const bool expected = IsGrpc(method) && (model > 0) == translation;
      const RequestMetrics::Series& s = requests_->series(model, method);
      const std::vector<ClientMetric::Label> labels = {{"method", MethodName(method)},
                                                       {"model", models[model]}};
      if (!AddRequestCounts(&requests, labels, s, requests_->client_labels(), expected)) continue;
      AddHistogram(&duration, labels, s.duration_seconds);
      if (translation && model > 0) {
        AddHistogram(&input, labels, s.input_tokens);
        AddHistogram(&output, labels, s.output_tokens);
      }
    }
    if (model > 0) {
      uint64_t copied = 0, cut = 0, through = 0;
      for (int m = 0; m < kNumMethods; ++m) {
        const RequestMetrics::Series& s = requests_->series(model, static_cast<Method>(m));
        copied += s.untranslated.load(std::memory_order_relaxed);
        cut += s.truncated.load(std::memory_order_relaxed);
        through += s.pivoted.load(std::memory_order_relaxed);
      }
      AddValue(&untranslated, {{"model", models[model]}}, static_cast<double>(copied));
      AddValue(&truncated, {{"model", models[model]}}, static_cast<double>(cut));
      AddValue(&pivoted, {{"model", models[model]}}, static_cast<double>(through));
    }
  }
  for (auto* f : {&requests, &duration, &input, &output, &untranslated, &truncated, &pivoted}) {
    out->push_back(std::move(*f));
  }
}

namespace {

struct HistogramSpec {
  const char* name;
  const char* help;
  const AtomicHistogram EngineMetrics::*field;
};
// The engine's metrics, one family each, labelled by model.
const HistogramSpec kHistograms[] = {
    {"glossa_queue_wait_seconds",
     "Time a sentence waited in the engine's queue before it was admitted to the batch.",
     &EngineMetrics::queue_wait_seconds},
    {"glossa_time_to_first_token_seconds",
     "Time from submission to the first certain output token, per job (request).",
     &EngineMetrics::time_to_first_token_seconds},
    {"glossa_encoder_batch_seconds",
     "Encoder time per batch of newly admitted sentences (cross-attention K/V included).",
     &EngineMetrics::encoder_seconds},
    {"glossa_decode_step_seconds", "Time of one decoder step over every active sequence.",
     &EngineMetrics::decode_step_seconds},
    {"glossa_batch_sequences",
     "Sequences per decoder step: decoder rows, i.e. sentences times their live beams.",
     &EngineMetrics::batch_sequences},
    {"glossa_sentence_input_tokens",
     "Source tokens per translated sentence, end of sentence included.",
     &EngineMetrics::input_tokens},
    {"glossa_sentence_output_tokens",
     "Generated tokens per translated sentence (best hypothesis), end of sentence excluded.",
     &EngineMetrics::output_tokens},
    {"glossa_target_source_length_ratio",
     "Target / source length in tokens per translated sentence (end of sentence excluded on "
     "both sides).",
     &EngineMetrics::length_ratio},
};
struct CounterSpec {
  const char* name;
  const char* help;
  const std::atomic<uint64_t> EngineMetrics::*field;
};
const CounterSpec kCounters[] = {
    {"glossa_input_tokens_total",
     "Source tokens of translated sentences, end of sentence "
     "included.",
     &EngineMetrics::input_tokens_total},
    {"glossa_output_tokens_total",
     "Tokens generated for translated sentences (best "
     "hypothesis), end of sentence excluded.",
     &EngineMetrics::output_tokens_total},
    {"glossa_sentences_total", "Sentences translated to the end.", &EngineMetrics::sentences_total},
    {"glossa_cancelled_total",
     "Jobs (requests) the engine stopped because the client "
     "cancelled.",
     &EngineMetrics::cancelled_total},
    {"glossa_deadline_exceeded_total",
     "Jobs (requests) the engine stopped because their "
     "deadline passed.",
     &EngineMetrics::expired_total},
    {"glossa_refused_late_total",
     "Jobs (requests) answered DEADLINE_EXCEEDED before their deadline because they could not "
     "finish in time even if admitted at once (--deadline_admission).",
     &EngineMetrics::refused_late_total},
    {"glossa_rejected_total",
     "Jobs (requests) refused with RESOURCE_EXHAUSTED because the "
     "queue was full.",
     &EngineMetrics::rejected_total},
    {"glossa_encoder_real_tokens_total",
     "Source tokens the encoder computed. Glossa packs a "
     "batch's sentences without padding; padding efficiency = this / "
     "glossa_encoder_padded_tokens_total.",
     &EngineMetrics::encoder_real_tokens_total},
    {"glossa_encoder_padded_tokens_total",
     "Source tokens a padded encoder batch would have "
     "computed (sentences × the longest, per batch); Glossa does not pad, so the difference to "
     "glossa_encoder_real_tokens_total is work saved.",
     &EngineMetrics::encoder_padded_tokens_total},
};
struct GaugeSpec {
  const char* name;
  const char* help;
  MetricType type;
  int64_t EngineStats::*field;
};
const GaugeSpec kGauges[] = {
    {"glossa_active_sequences", "Sentences being decoded now.", MetricType::Gauge,
     &EngineStats::active_sequences},
    {"glossa_active_rows", "Decoder rows (sentences × live beams) in the batch now.",
     MetricType::Gauge, &EngineStats::active_rows},
    {"glossa_queue_depth", "Sentences waiting for admission to the batch.", MetricType::Gauge,
     &EngineStats::queued_sources},
    {"glossa_kv_cache_bytes", "KV cache bytes in use (blocks held by live sequences).",
     MetricType::Gauge, &EngineStats::kv_bytes_in_use},
    {"glossa_kv_cache_capacity_bytes", "KV cache budget in bytes (--kv_cache_mb).",
     MetricType::Gauge, &EngineStats::kv_bytes_capacity},
    {"glossa_decode_steps_total", "Decoder steps run.", MetricType::Counter, &EngineStats::steps},
    {"glossa_batch_paused_steps_total",
     "Decoder steps that left PRIORITY_BATCH sentences waiting while interactive ones decoded "
     "(--batch_min_share).",
     MetricType::Counter, &EngineStats::batch_paused_steps},
};

}  // namespace

void MetricsCollector::CollectEngines(std::vector<MetricFamily>* out) const {
  std::vector<MetricFamily> histograms, counters, gauges;
  for (const auto& spec : kHistograms) {
    histograms.push_back(Family(spec.name, spec.help, MetricType::Histogram));
  }
  for (const auto& spec : kCounters) {
    counters.push_back(Family(spec.name, spec.help, MetricType::Counter));
  }
  for (const auto& spec : kGauges) gauges.push_back(Family(spec.name, spec.help, spec.type));
  auto lane_wait = Family("glossa_lane_queue_wait_seconds",
                          "Time a sentence waited for admission, by lane (interactive, batch).",
                          MetricType::Histogram);
  auto lane_depth =
      Family("glossa_lane_queue_depth",
             "Sentences waiting for admission, by lane (interactive, batch).", MetricType::Gauge);
  auto queue_capacity = Family("glossa_queue_capacity",
                               "Sentences that may wait for admission (--max_queue); beyond it "
                               "requests get RESOURCE_EXHAUSTED.",
                               MetricType::Gauge);
  auto build = Family("glossa_build_info",
                      "1 per loaded model, labelled with the server's version and git commit and "
                      "the model's languages and dtype.",
                      MetricType::Gauge);

  for (const auto& [name, entry] : registry_->models()) {
    const std::vector<ClientMetric::Label> labels = {{"model", name}};
    const EngineMetrics& metrics = entry->engine->metrics();
    const EngineStats stats = entry->engine->stats();  // lock-free
    for (size_t i = 0; i < histograms.size(); ++i) {
      AddHistogram(&histograms[i], labels, metrics.*kHistograms[i].field);
    }
    for (size_t i = 0; i < counters.size(); ++i) {
      AddValue(&counters[i], labels,
               static_cast<double>((metrics.*kCounters[i].field).load(std::memory_order_relaxed)));
    }
    for (size_t i = 0; i < gauges.size(); ++i) {
      AddValue(&gauges[i], labels, static_cast<double>(stats.*kGauges[i].field));
    }
    for (int lane = 0; lane < kLanes; ++lane) {
      const std::vector<ClientMetric::Label> by_lane = {{"lane", LaneName(Lane(lane))},
                                                        {"model", name}};
      AddHistogram(&lane_wait, by_lane, metrics.lane_queue_wait_seconds[lane]);
      AddValue(&lane_depth, by_lane, static_cast<double>(stats.queued_by_lane[lane]));
    }
    AddValue(&queue_capacity, labels,
             static_cast<double>(entry->engine->options().max_queued_sources));
    const ModelInfo& info = entry->model->info();
    AddValue(&build,
             {{"dtype", info.dtype},
              {"git_sha", build_.git_sha},
              {"model", name},
              {"source_language", info.source_language},
              {"target_language", info.target_language},
              {"version", build_.version}},
             1);
  }
  for (auto* group : {&histograms, &counters, &gauges}) {
    for (auto& f : *group) out->push_back(std::move(f));
  }
  out->push_back(std::move(lane_wait));
  out->push_back(std::move(lane_depth));
  out->push_back(std::move(queue_capacity));
  out->push_back(std::move(build));
}

void MetricsCollector::CollectProcess(std::vector<MetricFamily>* out) const {
  const std::vector<std::string> stat = ProcSelfStat();
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  auto add = [&](const char* name, const char* help, MetricType type, double value) {
    auto f = Family(name, help, type);
    AddValue(&f, {}, value);
    out->push_back(std::move(f));
  };
  add("process_cpu_seconds_total", "User and system CPU time spent, in seconds.",
      MetricType::Counter, (StatField(stat, 14) + StatField(stat, 15)) / ticks);
  add("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
      StatField(stat, 24) * page);
  add("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
      StatField(stat, 23));
  add("process_open_fds", "Open file descriptors.", MetricType::Gauge, OpenFds());
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    add("process_max_fds", "Most open file descriptors allowed.", MetricType::Gauge,
        static_cast<double>(limit.rlim_cur));
  }
  add("process_start_time_seconds", "Start time of the process since the Unix epoch, in seconds.",
      MetricType::Gauge, start_time_seconds_);
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& address, std::shared_ptr<prometheus::Collectable> collectable) {
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->collectable_ = std::move(collectable);
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/4);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  server->exposer_->RegisterCollectable(server->collectable_);
  const std::vector<int> ports = server->exposer_->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  server->port_ = ports.front();
  return server;
}

MetricsServer::~MetricsServer() = default;

}  // namespace glossa::server
