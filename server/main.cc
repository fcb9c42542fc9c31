// glossa-server: serves Glossa models over gRPC and HTTP. main() is the startup sequence, a
// function a step: flags, models, metrics, HTTP, gRPC, live models; then it waits for a signal
// and drains.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/deepl/deepl_api.h"
#include "server/demo_model.h"
#include "server/files/read_document.h"
#include "server/file_api/translate_file.h"
#include "server/jobs/document_jobs.h"
#include "server/glossaries/glossary_store.h"
#include "server/grpc/glossary_service.h"
#include "server/grpc/service.h"
#include "server/http/http_server.h"
#include "server/http_api/http_api.h"
#include "server/metrics/metrics.h"
#include "server/live/live_models.h"
#include "server/models/model_config.h"
#include "server/models/model_registry.h"
#include "util/malloc_tuning.h"
#include "util/status_macros.h"
#include "util/threads.h"
#include "util/usage.h"

#ifndef GLOSSA_VERSION
#define GLOSSA_VERSION "unknown"
#endif
#ifndef GLOSSA_GIT_SHA
#define GLOSSA_GIT_SHA "unknown"
#endif

ABSL_FLAG(std::vector<std::string>, model, {},
          "Model to serve, as NAME=PATH (a Glossa model file from model_tools/glossa-convert); "
          "repeat the flag or separate with commas for several. Default: the bundled demo model "
          "as 'opus-mt-es-en'. Not with --model_config.");
ABSL_FLAG(std::string, model_config, "", glossa::server::kModelConfigFlagHelp);
ABSL_FLAG(std::string, models_dir, "",
          "Folder of Glossa model files: each *.glossa is served under its file name (without "
          ".glossa) and loaded by its first request (which waits for it), not at start. With "
          "--model; with --model_config, a 'dir=' line instead");
ABSL_FLAG(int64_t, max_loaded_mb, 0,
          "Memory budget of the loaded models, in MiB (estimated from each model's file and "
          "compute type, plus the KV cache its engine has allocated): loading one more unloads "
          "others first, least recently used first (by their use before last: a model used "
          "once goes before one in steady use), idle ones before busy ones (which finish their "
          "requests); 0: no limit. A --model_config line 'max_loaded_mb=N' overrides it");
ABSL_FLAG(absl::Duration, model_config_poll, absl::Seconds(1),
          "How often --model_config and the model files it names are checked for changes (a "
          "change is applied once it has held still for one check); 0: only on SIGHUP");
ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "gRPC address, HOST:PORT (port 0 picks a free one; use 0.0.0.0 to listen everywhere)");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "Prometheus metrics address, HOST:PORT, served at /metrics (port 0 picks a free one; "
          "empty: no metrics endpoint). If this default address is taken the server warns and "
          "runs without metrics; an address given explicitly must be free.");
ABSL_FLAG(std::string, http_listen, "127.0.0.1:8080",
          "HTTP/JSON address, HOST:PORT: LibreTranslate's POST /translate, GET /languages, "
          "POST /detect, POST /translate_file, GET /download_file/<name>, GET /frontend/settings, "
          "POST /suggest and GET /health, Glossa's POST /v1/translate, GET /v1/models and "
          "/v1/glossaries (protobuf JSON), DeepL's API v2 under /v2/, and a page to try it at / "
          "(port 0 picks a free one; "
          "empty: no HTTP). If this default "
          "address is taken the server warns and runs without HTTP; an address given explicitly "
          "must be free. Bodies are limited by --max_message_bytes (/translate_file's by "
          "--max_file_mb).");
ABSL_FLAG(std::vector<std::string>, cors_origins, {},
          "Web pages of these origins (scheme://host[:port], comma-separated; '*': any) may call "
          "the HTTP API from a browser, and get CORS headers. Requests that carry another "
          "Origin than the server's own are refused (403): by default no other site's page can "
          "use the server through its users' browsers");
ABSL_FLAG(std::vector<std::string>, allowed_hosts, {},
          "Host header names accepted besides localhost, 127.0.0.1 and [::1] when HTTP listens "
          "on loopback (comma-separated), e.g. the name a reverse proxy forwards; any other "
          "name is refused (403), as a DNS rebinding would send it. Given with a non-loopback "
          "--http_listen, only these and the loopback names are accepted");
ABSL_FLAG(int64_t, grpc_memory_mb, 1024,
          "Memory gRPC may use for its connections and the messages it receives, in MiB (its "
          "resource quota): past it gRPC resets calls (RESOURCE_EXHAUSTED) and shrinks its "
          "buffers rather than grow. Keep it well above --max_message_bytes");
ABSL_FLAG(int, grpc_max_threads, 16,
          "Threads gRPC may run for its synchronous service, server reflection (one of them "
          "polls): calls past it get RESOURCE_EXHAUSTED. The other services run on gRPC's "
          "callback threads");
ABSL_FLAG(int, max_streams_per_connection, 100,
          "gRPC calls open at once on one client connection (HTTP/2's "
          "SETTINGS_MAX_CONCURRENT_STREAMS); further calls wait on the client's side");
ABSL_FLAG(absl::Duration, document_timeout, absl::Minutes(10),
          "How long one document (/translate_file, TranslateDocument) may take in all; past it "
          "the call ends with DEADLINE_EXCEEDED (HTTP 504) and its remaining segments are not "
          "sent. A gRPC call's own earlier deadline wins");
ABSL_FLAG(int, http_threads, 16, "HTTP requests served at once (a thread each)");
ABSL_FLAG(absl::Duration, http_timeout, absl::Seconds(30),
          "HTTP: the longest a client may take to send a request (headers and body), and each "
          "network write; slower clients are disconnected");
ABSL_FLAG(int, http_slow_per_address, 4,
          "HTTP: connections of one client address that may be sending their request head "
          "slowly, or nothing, at once (slowloris), and never more than a quarter of "
          "--http_threads; the server cuts the others, so that a few clients cannot hold every "
          "HTTP thread. 0: no limit");
ABSL_FLAG(absl::Duration, http_translate_timeout, absl::Seconds(120),
          "HTTP: the deadline of one translation (then 504)");
ABSL_FLAG(int, workers, 0,
          "Engine workers (step loops) per model; 0 = one per CPU core, at "
          "most 8. Each worker batches the sentences it holds step by step (docs/performance.md "
          "compares 2 workers x 1 thread with 1 x 2)");
ABSL_FLAG(int, threads, 1,
          "Compute threads (OpenMP) per engine worker; workers × threads "
          "should not exceed the cores");
ABSL_FLAG(std::string, compute_type, "", glossa::kComputeTypeFlagHelp);  // for every model
ABSL_FLAG(bool, float32_output_layer, false, glossa::kFloat32OutputLayerFlagHelp);
ABSL_FLAG(bool, argmax_screen, true, glossa::kArgmaxScreenFlagHelp);
ABSL_FLAG(int64_t, max_text_bytes, 10000, "Longest text accepted, in bytes");
ABSL_FLAG(int, max_text_tokens, 0,
          "Longest text accepted, in source tokens (end of sentence "
          "included); 0 = the model's limit");
ABSL_FLAG(int, max_texts_per_request, 256, "Most texts in one Translate request");
ABSL_FLAG(int, max_beam_size, 16, "Largest beam_size a request may ask for");
ABSL_FLAG(int, default_beam_size, 4, "Beam size when a request leaves it 0 (1 = greedy)");
ABSL_FLAG(int, max_output_tokens, 0,
          "Default and largest max_output_tokens; 0 = the model's "
          "limit");
ABSL_FLAG(int, max_queue, 4096,
          "Sentences waiting for the engine beyond which requests get "
          "RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_active_sequences, 64, "Sentences decoded together per worker (batch size)");
ABSL_FLAG(double, batch_min_share, 0.25,
          "Share of --max_active_sequences that PRIORITY_BATCH requests (glossa-batch) may fill "
          "even while interactive requests wait (their guarantee against starvation), and the "
          "most they fill while interactive work is present (see --interactive_hold); otherwise "
          "batch work fills all the capacity. 0..1");
ABSL_FLAG(bool, deadline_admission, true,
          "Within a lane, admit requests earliest deadline first, and answer DEADLINE_EXCEEDED at "
          "once to a request that cannot finish before its deadline even if admitted now (the "
          "engine learns its step time per batch size and the target/source length ratio as it "
          "works; counted in glossa_refused_late_total). false: arrival order, and a late request "
          "keeps its place until its deadline passes");
ABSL_FLAG(absl::Duration, interactive_hold, absl::Seconds(2),
          "Batch work stays within --batch_min_share while interactive requests decode, wait, or "
          "arrived within this time: interactive sentences then decode in steps that a full "
          "batch does not slow down. 0: only while they decode or wait");
ABSL_FLAG(int64_t, cache_bytes, -1,
          "Result cache: finished translations kept (LRU) for repeated texts with the same model "
          "and options, in bytes; -1 = 1/256 of the machine's memory (at most 1 GiB), 0 = off. "
          "Sampling without a seed is never cached");
ABSL_FLAG(int64_t, kv_cache_mb, 1024,
          "KV cache budget per model, in MiB (worst case of the "
          "admitted sentences)");
ABSL_FLAG(int64_t, max_message_bytes, 4 << 20, "Largest gRPC message accepted, in bytes");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain: serve gRPC over TLS (with --tls_key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA certificates: with TLS, require client "
          "certificates signed by them (mutual TLS)");
ABSL_FLAG(std::string, auth_token_file, "",
          "File of the clients' bearer tokens: one bare token (client 'default'), or lines "
          "'NAME TOKEN', one per client ('#' comment lines and blank lines skipped). "
          "Translate, TranslateStream, TranslateDocument, ListModels and the GlossaryService "
          "calls then require a client's token as 'authorization: Bearer <token>' metadata, and "
          "the HTTP routes as LibreTranslate's api_key or an 'Authorization: Bearer' header "
          "(health, reflection and the HTTP routes that translate nothing, /health, /languages, "
          "/frontend/settings and the page, stay open). The client's name labels its requests "
          "in the metrics and the request log, and keys --req_limit");
ABSL_FLAG(bool, log_requests, false,
          "Write a line per finished request to stderr: method, model, client (the "
          "--auth_token_file name, or 'anonymous'), status code and milliseconds");
ABSL_FLAG(std::string, glossary_dir, "",
          "Where stored glossaries (GlossaryService, /v1/glossaries) are kept, a file each, "
          "written atomically (a crash leaves whole files only); created if missing. Empty: in "
          "memory only, lost at exit");
ABSL_FLAG(int64_t, glossary_store_mb, 64,
          "What the stored glossaries may hold in memory together, in MiB, counted as a "
          "glossary's own 1 MiB limit counts (each term's bytes and 256 more). A glossary that "
          "would pass it is refused with RESOURCE_EXHAUSTED (HTTP 507) until others are deleted. "
          "At start every glossary in --glossary_dir is loaded, even past it (a warning says "
          "so, and none can be created until enough are deleted)");
ABSL_FLAG(int, char_limit, -1,
          "LibreTranslate's --char-limit: most characters in one text of /translate (a 400 past "
          "it); -1: none (the token limit still applies)");
ABSL_FLAG(int, batch_limit, -1,
          "LibreTranslate's --batch-limit: most texts in one /translate q array; -1: none "
          "(--max_texts_per_request still applies)");
ABSL_FLAG(int, req_limit, -1,
          "LibreTranslate's --req-limit: requests a minute per client on /translate, /detect and "
          "/translate_file, counted once the token was checked, then 429 'Slowdown'; -1: none. "
          "A client is its --auth_token_file name when tokens are required, else its address");
ABSL_FLAG(int64_t, max_file_mb, 20,
          "LibreTranslate's POST /translate_file: the largest file accepted, in MiB (a 413 past "
          "it) and gRPC's TranslateDocument (whose message is also within --max_message_bytes); "
          "the formats are .txt, .md/.markdown, .srt, .vtt, .html/.htm, .docx, .pptx, .xlsx, "
          ".odt, .odp, .epub");
ABSL_FLAG(int, max_documents, 8,
          "Documents queued or in translation at once, from every front end (/translate_file, "
          "TranslateDocument); past it RESOURCE_EXHAUSTED (HTTP 429)");
ABSL_FLAG(int, document_workers, 2,
          "Documents translated at once, each on a worker thread of its own (their segments "
          "share the engine with every other request); the others wait in the queue");
ABSL_FLAG(int64_t, document_memory_mb, 512,
          "What the documents in flight may hold in memory together, in MiB, as estimated: "
          "the uploads, their inflated parts, segments, translations and the files written. "
          "Past it RESOURCE_EXHAUSTED (HTTP 429); a file that alone needs more: 400");
ABSL_FLAG(absl::Duration, file_keep, absl::Minutes(30),
          "How long a translated file stays at its /download_file/<name> link");
ABSL_FLAG(int64_t, file_keep_mb, 256,
          "Translated files kept for download in all, in MiB (in memory); past it the oldest "
          "are dropped");
ABSL_FLAG(std::string, pivot_language, "en",
          "A request that names no model and whose pair no model translates goes through this "
          "language: source -> pivot by one model, pivot -> target by another (the response's "
          "model is 'first+second'). Empty: never");
ABSL_FLAG(absl::Duration, shutdown_timeout, absl::Seconds(30),
          "On SIGTERM/SIGINT, how long in-flight requests may run before they are cancelled");

namespace {

using glossa::server::BuildInfo;
using glossa::server::ClientTokens;
using glossa::server::DeeplApi;
using glossa::server::DefaultCacheBytes;
using glossa::server::FileApi;
using glossa::server::FileApiOptions;
using glossa::server::RpcRecord;
using glossa::server::DocumentOptions;
using glossa::server::DocumentJob;
using glossa::server::DocumentJobs;
using glossa::server::DocumentTranslator;
using glossa::server::TranslatedDocument;
using glossa::server::GlossaryLimits;
using glossa::server::GlossaryServiceImpl;
using glossa::server::GlossaryStore;
using glossa::server::HttpApi;
using glossa::server::HttpRequest;
using glossa::server::HttpServer;
using glossa::server::HttpServerOptions;
using glossa::server::LiveModels;
using glossa::server::MetricsCollector;
using glossa::server::MetricsServer;
using glossa::server::ModelDefaults;
using glossa::server::ModelRegistry;
using glossa::server::ModelSpec;
using glossa::server::ParseModelFlag;
using glossa::server::ModelState;
using glossa::server::ReadServedModels;
using glossa::server::ScanModelsDir;
using glossa::server::ServedModels;
using glossa::server::RequestLimits;
using glossa::server::RequestMetrics;
using glossa::server::ResultCache;
using glossa::server::TranslatorService;
using glossa::server::UnknownMethodService;

std::string DefaultModelPath(const char* argv0) {
  const std::string exe(argv0);
  const std::string dir = exe.find('/') == std::string::npos ? "." : exe.substr(0, exe.rfind('/'));
  for (const std::string& candidate :
       {dir + "/../models/opus-mt-es-en-bible.glossa",
        dir + "/../../models/opus-mt-es-en-bible.glossa",
        std::string("/opt/glossa/models/opus-mt-es-en-bible.glossa")}) {
    if (std::ifstream(candidate).good()) return candidate;
  }
  return "models/opus-mt-es-en-bible.glossa";
}

// Repeated --model flags accumulate (absl keeps only the last occurrence).
void MergeRepeatedModelFlags(int& argc, char** argv, std::vector<std::string>& storage) {
  std::vector<std::string> models;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--model" || arg == "-model") && i + 1 < argc) {
      models.push_back(argv[++i]);
    } else if (arg.rfind("--model=", 0) == 0) {
      models.push_back(arg.substr(8));
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (models.size() <= 1) return;
  storage.push_back("--model=" + absl::StrJoin(models, ","));
  rest.push_back(storage.back().data());
  for (size_t i = 0; i < rest.size(); ++i) argv[i] = rest[i];
  argc = static_cast<int>(rest.size());
}

bool FlagOnCommandLine(int argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    for (const std::string& prefix : {"--" + name, "-" + name}) {
      if (arg == prefix || arg.rfind(prefix + "=", 0) == 0) return true;
    }
  }
  return false;
}

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read '", path, "'"));
  }
  if (data.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": '", path, "' is missing or empty"));
  }
  return data;
}

// Plaintext, or TLS (optionally mutual) from the --tls_* flags.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials() {
  const std::string cert = absl::GetFlag(FLAGS_tls_cert), key = absl::GetFlag(FLAGS_tls_key);
  const std::string client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  if (cert.empty() && key.empty()) {
    if (!client_ca.empty()) return absl::InvalidArgumentError("--tls_client_ca needs --tls_cert");
    return grpc::InsecureServerCredentials();
  }
  if (cert.empty() || key.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls_cert and --tls_key");
  }
  grpc::SslServerCredentialsOptions options;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  GLOSSA_ASSIGN_OR_RETURN(pair.cert_chain, ReadFile("tls_cert", cert));
  GLOSSA_ASSIGN_OR_RETURN(pair.private_key, ReadFile("tls_key", key));
  options.pem_key_cert_pairs.push_back(pair);
  if (!client_ca.empty()) {
    GLOSSA_ASSIGN_OR_RETURN(options.pem_root_certs, ReadFile("tls_client_ca", client_ca));
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

// SIGTERM and SIGINT (and SIGHUP, to reload --model_config): main() waits for them with sigwait.
sigset_t BlockSignals(bool reload) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  if (reload) sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread starts: all inherit it
  return set;
}

// What the command line says beyond the flags' values.
struct CommandLine {
  bool metrics_listen_given = false;  // an explicit address must be free; the default may not be
  bool http_listen_given = false;
};

CommandLine ParseCommandLine(int argc, char** argv) {
  glossa::SetUsage(
      "Serves translation models over gRPC (services glossa.v1.Translator and\n"
      "glossa.v1.GlossaryService, health, reflection)\n"
      "and HTTP/JSON (LibreTranslate's API, /v1/translate, and a page to try it at /).\n"
      "  glossa-server [--model NAME=PATH ... | --model_config FILE] [--listen HOST:PORT]\n"
      "With --model_config the models change while the server runs: edit the file (or send\n"
      "SIGHUP) to add, replace or remove models without a restart.");
  static std::vector<std::string> merged;  // argv points into it
  MergeRepeatedModelFlags(argc, argv, merged);
  CommandLine line;
  line.metrics_listen_given = FlagOnCommandLine(argc, argv, "metrics_listen");
  line.http_listen_given = FlagOnCommandLine(argc, argv, "http_listen");
  absl::ParseCommandLine(argc, argv);
  return line;
}

// What every model gets unless its --model_config entry says otherwise.
absl::StatusOr<ModelDefaults> DefaultsFromFlags() {
  glossa::EngineOptions engine;
  engine.workers = absl::GetFlag(FLAGS_workers);
  if (engine.workers <= 0) {
    engine.workers = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 8);
  }
  engine.threads_per_worker = absl::GetFlag(FLAGS_threads);
  engine.max_beam_size = absl::GetFlag(FLAGS_max_beam_size);
  engine.default_beam_size = absl::GetFlag(FLAGS_default_beam_size);
  engine.max_output_tokens = absl::GetFlag(FLAGS_max_output_tokens);
  engine.max_queued_sources = absl::GetFlag(FLAGS_max_queue);
  engine.max_active_sequences = absl::GetFlag(FLAGS_max_active_sequences);
  engine.max_active_rows = engine.max_active_sequences * 4;
  engine.batch_min_share = absl::GetFlag(FLAGS_batch_min_share);
  engine.interactive_hold = absl::GetFlag(FLAGS_interactive_hold);
  engine.deadline_admission = absl::GetFlag(FLAGS_deadline_admission);
  if (!(engine.batch_min_share >= 0.0 && engine.batch_min_share <= 1.0)) {
    return absl::InvalidArgumentError("--batch_min_share must be between 0 and 1");
  }
  engine.kv_cache_bytes = absl::GetFlag(FLAGS_kv_cache_mb) << 20;
  if (engine.default_beam_size < 1 || engine.default_beam_size > engine.max_beam_size) {
    return absl::InvalidArgumentError("--default_beam_size must be between 1 and --max_beam_size");
  }
  ModelDefaults defaults;
  defaults.engine_options = engine;
  defaults.model_options.compute_type = absl::GetFlag(FLAGS_compute_type);
  defaults.model_options.float32_output_layer = absl::GetFlag(FLAGS_float32_output_layer);
  defaults.model_options.argmax_screen = absl::GetFlag(FLAGS_argmax_screen);
  return defaults;
}

// The models to serve and their memory budget: --model_config's, or the --model flags' and
// --models_dir's (default: the demo model).
absl::StatusOr<ServedModels> ModelSpecs(const ModelDefaults& defaults, const char* argv0) {
  const std::string model_config = absl::GetFlag(FLAGS_model_config);
  const std::string models_dir = absl::GetFlag(FLAGS_models_dir);
  std::vector<std::string> model_flags = absl::GetFlag(FLAGS_model);
  if (!model_config.empty() && (!model_flags.empty() || !models_dir.empty())) {
    return absl::InvalidArgumentError(
        "--model and --models_dir do not go together with --model_config: list every model "
        "(or 'dir=' folder) in the config file");
  }
  if (absl::GetFlag(FLAGS_max_loaded_mb) < 0) {
    return absl::InvalidArgumentError("--max_loaded_mb must be 0 (no limit) or more");
  }
  if (!model_config.empty()) {
    auto read = ReadServedModels(model_config, defaults);
    if (!read.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--model_config ", read.status().message()));
    }
    return read;
  }
  ServedModels served;
  if (model_flags.empty() && models_dir.empty()) {
    model_flags.push_back("opus-mt-es-en=" + DefaultModelPath(argv0));
    served.demo = true;
  }
  for (const std::string& flag : model_flags) {
    GLOSSA_ASSIGN_OR_RETURN(ModelSpec spec, ParseModelFlag(flag, defaults));
    served.specs.push_back(std::move(spec));
  }
  if (!models_dir.empty()) {
    ModelSpec options;
    options.model_options = defaults.model_options;
    options.engine_options = defaults.engine_options;
    auto found = ScanModelsDir(models_dir, options);
    if (!found.ok()) return absl::InvalidArgumentError(absl::StrCat("--models_dir: ", found.status().message()));
    if (found->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--models_dir ", models_dir, ": no *.glossa file there"));
    }
    std::set<std::string> names;
    for (const ModelSpec& spec : served.specs) names.insert(spec.name);
    for (ModelSpec& spec : *found) {
      if (names.insert(spec.name).second) served.specs.push_back(std::move(spec));
    }
  }
  return served;
}

// Whether the server may unload models to stay within a memory budget (then it hands freed
// memory back to the system rather than keep it for the next allocations).
bool UnloadsModels(const ServedModels& served) {
  if (served.max_loaded_mb > 0 || absl::GetFlag(FLAGS_max_loaded_mb) > 0) return true;
  return std::any_of(served.specs.begin(), served.specs.end(),
                     [](const ModelSpec& spec) { return spec.on_demand; });
}

// "es -> en" for a bilingual model, "100 languages" for a multilingual one.
std::string LanguagesOf(const glossa::ModelInfo& info) {
  if (!info.languages.empty()) return absl::StrCat(info.languages.size(), " languages");
  return absl::StrCat(info.source_language.empty() ? "?" : info.source_language, " -> ",
                      info.target_language.empty() ? "?" : info.target_language);
}

absl::StatusOr<std::unique_ptr<ModelRegistry>> LoadModels(const ServedModels& served) {
  GLOSSA_ASSIGN_OR_RETURN(std::unique_ptr<ModelRegistry> registry,
                          ModelRegistry::Load(served.specs));
  registry->SetDrainTimeout(absl::GetFlag(FLAGS_shutdown_timeout));
  const int64_t budget_mb =
      served.max_loaded_mb >= 0 ? served.max_loaded_mb : absl::GetFlag(FLAGS_max_loaded_mb);
  registry->SetBudget(budget_mb << 20);
  // The operators' view of what is served (ListModels sends no file paths to clients).
  for (const auto& [name, entry] : registry->catalogue()) {
    const glossa::ModelInfo& info = entry.card->info;
    std::printf("glossa-server: model %s from %s (%s, %s, %s)%s\n", name.c_str(),
                entry.card->spec.path.c_str(), info.config.architecture.c_str(),
                info.dtype.c_str(), LanguagesOf(info).c_str(),
                entry.state == ModelState::kLoaded ? "" : ", loaded by its first request");
  }
  if (served.demo) std::printf("glossa-server: %s\n", glossa::server::kDemoAbout);
  if (budget_mb > 0) std::printf("glossa-server: memory budget of the loaded models: %lld MiB\n",
                                 static_cast<long long>(budget_mb));
  return registry;
}

RequestLimits LimitsFromFlags() {
  RequestLimits limits;
  limits.max_text_bytes = absl::GetFlag(FLAGS_max_text_bytes);
  limits.max_text_tokens = absl::GetFlag(FLAGS_max_text_tokens);
  limits.max_texts = absl::GetFlag(FLAGS_max_texts_per_request);
  return limits;
}

std::vector<std::string> ModelNames(const ModelRegistry& registry) {
  std::vector<std::string> names;
  for (const auto& [name, card] : registry.cards()) names.push_back(name);
  return names;
}

// --cache_bytes: nullptr when the cache is off.
std::unique_ptr<ResultCache> CacheFromFlags() {
  const int64_t bytes = absl::GetFlag(FLAGS_cache_bytes);
  if (bytes == 0) return nullptr;
  return std::make_unique<ResultCache>(bytes < 0 ? DefaultCacheBytes() : bytes);
}

// A listener started at an address from a flag. A failure at an address given on the command
// line stops the server; at the default address, it only warns (`what` runs without it).
template <typename Server>
absl::StatusOr<std::unique_ptr<Server>> Listening(absl::StatusOr<std::unique_ptr<Server>> started,
                                                  bool given, const std::string& flag,
                                                  const std::string& what) {
  if (started.ok()) return started;
  if (given) {
    return absl::Status(started.status().code(), absl::StrCat(started.status().message(), " (--",
                                                              flag, " \"\" turns ", what, " off)"));
  }
  std::cerr << "glossa-server: warning: " << started.status().message() << " (running without "
            << what << "; set --" << flag << ")\n";
  return nullptr;
}

std::string HostOf(const std::string& address) { return address.substr(0, address.rfind(':')); }

// Metrics first, so that a scraper sees the server from its first request on. nullptr: none.
absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetrics(const ModelRegistry* registry,
                                                            const RequestMetrics* requests,
                                                            const ResultCache* cache,
                                                            const DocumentJobs* documents,
                                                            bool given) {
  const std::string address = absl::GetFlag(FLAGS_metrics_listen);
  if (address.empty()) return nullptr;
  auto collector = std::make_shared<MetricsCollector>(registry, requests,
                                                      BuildInfo{GLOSSA_VERSION, GLOSSA_GIT_SHA});
  collector->SetCache(cache);
  collector->SetDocuments([documents] {
    const DocumentJobs::Counts counts = documents->counts();
    return glossa::server::DocumentGauges{counts.queued, counts.running, counts.memory_bytes,
                                          documents->memory_limit()};
  });
  GLOSSA_ASSIGN_OR_RETURN(std::unique_ptr<MetricsServer> server,
                          Listening(MetricsServer::Start(address, std::move(collector)), given,
                                    "metrics_listen", "metrics"));
  if (server != nullptr) {
    std::printf("glossa-server: metrics on http://%s:%d/metrics\n", HostOf(address).c_str(),
                server->port());
  }
  return server;
}

// --auth_token_file: every translation then needs a client's token, over gRPC and HTTP alike.
// No flag: no clients. A file without a token is an error (an empty set would switch
// authentication off, silently); errors name a line, never what it holds.
absl::StatusOr<ClientTokens> ClientTokensFromFlags() {
  const std::string token_file = absl::GetFlag(FLAGS_auth_token_file);
  if (token_file.empty()) return ClientTokens();
  GLOSSA_ASSIGN_OR_RETURN(std::string text, ReadFile("auth_token_file", token_file));
  absl::StatusOr<ClientTokens> clients = ClientTokens::Parse(text);
  if (!clients.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--auth_token_file ", token_file, ": ",
                                                   clients.status().message()));
  }
  std::vector<std::string> names = clients->names();
  names.erase(names.begin());  // the anonymous client
  std::printf("glossa-server: requests need a client's token (--auth_token_file): %s\n",
              absl::StrJoin(names, ", ").c_str());
  return clients;
}

// --glossary_dir: the stored glossaries, loaded (an empty flag: a store in memory).
absl::StatusOr<std::unique_ptr<GlossaryStore>> OpenGlossaries(TranslatorService& service) {
  const std::string dir = absl::GetFlag(FLAGS_glossary_dir);
  const int64_t store_mb = absl::GetFlag(FLAGS_glossary_store_mb);
  constexpr int64_t kMaxStoreMb = int64_t{1} << 20;  // 1 TiB: far past any server's memory
  if (store_mb < 1 || store_mb > kMaxStoreMb) {
    return absl::InvalidArgumentError(
        absl::StrCat("--glossary_store_mb is ", store_mb, "; give 1 to ", kMaxStoreMb, " (MiB)"));
  }
  GlossaryLimits limits;
  limits.max_store_bytes = store_mb << 20;
  auto store = GlossaryStore::Open(dir, limits);
  if (!store.ok()) {
    return absl::Status(store.status().code(),
                        absl::StrCat("--glossary_dir: ", store.status().message()));
  }
  service.SetGlossaries(store->get());
  if (!dir.empty()) {
    const double held_mb = static_cast<double>((*store)->HeldBytes()) / (1 << 20);
    std::printf(
        "glossa-server: %zu stored glossaries in %s (%.1f of --glossary_store_mb=%lld MiB)\n",
        (*store)->List().size(), dir.c_str(), held_mb, static_cast<long long>(store_mb));
  }
  return store;
}

// The HTTP side: the API and the server that calls it (both null when --http_listen is empty).
struct HttpFront {
  std::unique_ptr<HttpApi> api;
  std::unique_ptr<FileApi> files;
  std::unique_ptr<DeeplApi> deepl;
  std::unique_ptr<HttpServer> server;
};

// Files (/translate_file, TranslateDocument): their size and how their segments are sent.
DocumentOptions DocumentOptionsFromFlags() {
  DocumentOptions options;
  options.max_file_bytes = std::max<int64_t>(1, absl::GetFlag(FLAGS_max_file_mb)) << 20;
  options.batch_texts = std::max(1, std::min(64, absl::GetFlag(FLAGS_max_texts_per_request)));
  options.timeout = absl::GetFlag(FLAGS_http_translate_timeout);
  options.document_timeout = absl::GetFlag(FLAGS_document_timeout);
  return options;
}

// The document jobs of every front end: their workers, queue and memory budget.
std::unique_ptr<DocumentJobs> DocumentJobsFromFlags(const DocumentTranslator* translator) {
  glossa::server::DocumentJobsOptions options;
  options.workers = std::max(1, absl::GetFlag(FLAGS_document_workers));
  options.max_jobs = std::max(1, absl::GetFlag(FLAGS_max_documents));
  options.memory_bytes = std::max<int64_t>(1, absl::GetFlag(FLAGS_document_memory_mb)) << 20;
  return std::make_unique<DocumentJobs>(translator, options);
}

// gRPC's TranslateDocument, done by `jobs` (server/jobs/ is a room above the service).
void ServeDocuments(TranslatorService* service, DocumentJobs* jobs) {
  service->SetDocumentHandler(
      [jobs](glossa::v1::TranslateDocumentRequest r, absl::Time deadline, RpcRecord* record,
             TranslatorService::DocumentDone done) -> absl::StatusOr<std::function<void()>> {
        DocumentJob job{r.file_name(), std::move(*r.mutable_content()), r.source_language(),
                        r.target_language(), r.model()};
        auto ticket = jobs->Submit(
            std::move(job), deadline, record,
            [done = std::move(done)](absl::StatusOr<TranslatedDocument> translated) {
              if (!translated.ok()) return done(translated.status());
              glossa::v1::TranslateDocumentResponse out;
              out.set_content(std::move(translated->bytes));
              out.set_file_name(std::move(translated->file_name));
              out.set_source_language(std::move(translated->source));
              out.set_segments(static_cast<int32_t>(translated->segments));
              done(std::move(out));
            });
        if (!ticket.ok()) return ticket.status();
        return [ticket = *std::move(ticket)] { ticket->Cancel(); };
      });
}

// LibreTranslate's file API, its routes handed to `api` (server/file_api/ is a room above it).
std::unique_ptr<FileApi> NewFileApi(const TranslatorService* service, HttpApi* api,
                                    DocumentJobs* jobs) {
  FileApiOptions options;
  options.max_file_bytes = std::max<int64_t>(1, absl::GetFlag(FLAGS_max_file_mb)) << 20;
  options.keep = absl::GetFlag(FLAGS_file_keep);
  options.keep_bytes = std::max<int64_t>(1, absl::GetFlag(FLAGS_file_keep_mb)) << 20;
  // Half of the HTTP threads at most wait for documents: the rest serve /health and /translate.
  options.max_waiting = std::max(1, absl::GetFlag(FLAGS_http_threads) / 2);
  auto files = std::make_unique<FileApi>(service, &api->libre_limits(), options, jobs);
  api->SetFileApi([files = files.get()](const HttpRequest& request) {
    return files->Handle(request);
  }, glossa::server::SupportedDocumentFormats());
  return files;
}

// DeepL's API, its paths under /v2/ handed to `api` (server/deepl/ is a room above it).
std::unique_ptr<DeeplApi> NewDeeplApi(const TranslatorService* service, GlossaryStore* glossaries,
                                      HttpApi* api) {
  auto deepl = std::make_unique<DeeplApi>(service, glossaries, &api->libre_limits(),
                                          absl::GetFlag(FLAGS_http_translate_timeout));
  api->SetDeeplApi([deepl = deepl.get()](const HttpRequest& request) {
    return deepl->Handle(request);
  });
  return deepl;
}

// --cors_origins and --allowed_hosts; warns when any page may call a server without a token.
glossa::server::BrowserPolicy BrowserPolicyFromFlags(const std::string& address, bool token) {
  glossa::server::BrowserPolicy policy;
  policy.cors_origins = absl::GetFlag(FLAGS_cors_origins);
  policy.allowed_hosts = absl::GetFlag(FLAGS_allowed_hosts);
  policy.check_host = glossa::server::IsLoopbackHost(HostOf(address)) ||
                      !policy.allowed_hosts.empty();
  const auto& origins = policy.cors_origins;
  if (!token && std::find(origins.begin(), origins.end(), "*") != origins.end()) {
    std::fprintf(stderr, "glossa-server: warning: --cors_origins '*' lets any web page your "
                         "users open call this server, which requires no token "
                         "(--auth_token_file)\n");
  }
  return policy;
}

// After the token is set: HTTP's routes check the same one.
absl::StatusOr<HttpFront> StartHttp(const TranslatorService* service, GlossaryStore* glossaries,
                                    DocumentJobs* jobs, bool given, bool demo) {
  HttpFront front;
  const std::string address = absl::GetFlag(FLAGS_http_listen);
  if (address.empty()) return front;
  front.api = std::make_unique<HttpApi>(service, absl::GetFlag(FLAGS_http_translate_timeout));
  front.api->SetGlossaries(glossaries);
  if (demo) front.api->SetIntroduction(glossa::server::kDemoAbout, glossa::server::DemoExamples());
  front.api->SetLibreLimits(absl::GetFlag(FLAGS_char_limit), absl::GetFlag(FLAGS_batch_limit),
                            absl::GetFlag(FLAGS_req_limit));
  HttpServerOptions options;
  options.address = address;
  options.threads = std::max(1, absl::GetFlag(FLAGS_http_threads));
  options.timeout = absl::GetFlag(FLAGS_http_timeout);
  options.max_slow_per_address = std::max(0, absl::GetFlag(FLAGS_http_slow_per_address));
  options.max_body_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.browsers = BrowserPolicyFromFlags(address, service->RequiresToken());
  front.files = NewFileApi(service, front.api.get(), jobs);
  options.path_max_body_bytes["/translate_file"] = front.files->max_body_bytes();
  front.deepl = NewDeeplApi(service, glossaries, front.api.get());
  auto started = HttpServer::Start(options, [api = front.api.get()](const HttpRequest& request) {
    return api->Handle(request);
  });
  GLOSSA_ASSIGN_OR_RETURN(front.server,
                          Listening(std::move(started), given, "http_listen", "HTTP"));
  if (front.server != nullptr) {
    std::printf("glossa-server: HTTP on http://%s:%d/\n", HostOf(address).c_str(),
                front.server->port());
  }
  return front;
}

// gRPC's resource quota (--grpc_memory_mb, --grpc_max_threads).
struct GrpcQuota {
  size_t bytes = 0;
  int threads = 0;
};

absl::StatusOr<GrpcQuota> GrpcQuotaFromFlags() {
  const int64_t mb = absl::GetFlag(FLAGS_grpc_memory_mb);
  const int threads = absl::GetFlag(FLAGS_grpc_max_threads);
  if (mb < 1 || mb > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError("--grpc_memory_mb must be between 1 and 2^30");
  }
  if (threads < 1) return absl::InvalidArgumentError("--grpc_max_threads must be 1 or more");
  const GrpcQuota quota{static_cast<size_t>(mb) << 20, threads};
  if (quota.bytes < static_cast<size_t>(absl::GetFlag(FLAGS_max_message_bytes))) {
    std::fprintf(stderr, "glossa-server: warning: --grpc_memory_mb is less than "
                         "--max_message_bytes: gRPC refuses messages near that size "
                         "(RESOURCE_EXHAUSTED)\n");
  }
  return quota;
}

// gRPC: our services (Translator, GlossaryService), health, reflection, and an answer for
// unknown methods, within `limits`.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartGrpc(
    const std::vector<grpc::Service*>& services,
    std::shared_ptr<grpc::ServerCredentials> credentials, UnknownMethodService* unknown_methods,
    const GrpcQuota& limits, int* port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ResourceQuota quota("glossa-server");
  quota.Resize(limits.bytes).SetMaxThreads(limits.threads);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen), credentials, port);
  // gRPC shares a port with another process (SO_REUSEPORT) by default on Linux: a second server
  // on a taken port would start, and take half of the first one's connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Calls open at once on one connection (HTTP/2 streams): a client past it waits its turn.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             std::max(1, absl::GetFlag(FLAGS_max_streams_per_connection)));
  builder.SetMaxReceiveMessageSize(static_cast<int>(absl::GetFlag(FLAGS_max_message_bytes)));
  builder.SetResourceQuota(quota);
  for (grpc::Service* service : services) builder.RegisterService(service);
  builder.RegisterCallbackGenericService(unknown_methods);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", absl::GetFlag(FLAGS_listen)));
  }
  return server;
}

void ReportServing(grpc::HealthCheckServiceInterface* health, const ModelRegistry& registry) {
  health->SetServingStatus(true);
  // Catalogued models serve too (their first request loads them).
  for (const auto& [name, card] : registry.cards()) health->SetServingStatus(name, true);
  health->SetServingStatus("glossa.v1.Translator", true);
  health->SetServingStatus("glossa.v1.GlossaryService", true);
}

// --model_config: the set changes while the server runs. Health per name follows it, and so do
// the request metrics' labels. nullptr without --model_config.
std::unique_ptr<LiveModels> FollowModelConfig(ModelRegistry* models, const ModelDefaults& defaults,
                                              grpc::HealthCheckServiceInterface* health,
                                              RequestMetrics* requests) {
  const std::string model_config = absl::GetFlag(FLAGS_model_config);
  if (model_config.empty()) return nullptr;
  models->SetServingCallback([health, models, requests](const std::string& name, bool serving) {
    health->SetServingStatus(name, serving);
    requests->SetLoaded(ModelNames(*models));
  });
  auto live = std::make_unique<LiveModels>(models, model_config, defaults,
                                           absl::GetFlag(FLAGS_model_config_poll),
                                           absl::GetFlag(FLAGS_max_loaded_mb) << 20);
  live->Start();
  return live;
}

// The try-line names the glossa-client beside this binary (build/, the image's PATH) and, for
// the demo model, a sentence it translates well.
void PrintHowToCall(int port, const ModelRegistry& registry, bool demo, const char* argv0) {
  const std::string host = HostOf(absl::GetFlag(FLAGS_listen));
  std::printf("glossa-server: listening on %s:%d (models: %s)\n", host.c_str(), port,
              registry.Names().c_str());
  const std::string exe(argv0);
  const size_t slash = exe.rfind('/');
  const std::string client =
      slash == std::string::npos ? "glossa-client" : exe.substr(0, slash + 1) + "glossa-client";
  const std::string what = demo ? absl::StrCat("\"", glossa::server::DemoExamples()[0], "\"")
                                : std::string("--list");
  std::printf("glossa-server: try  %s --server %s:%d %s\n", client.c_str(),
              host == "0.0.0.0" ? "127.0.0.1" : host.c_str(), port, what.c_str());
  std::fflush(stdout);
}

// Waits for SIGTERM or SIGINT, reloading the model config on each SIGHUP; returns the signal.
int WaitForStopSignal(const sigset_t& signals, LiveModels* live) {
  int signal = 0;
  while (sigwait(&signals, &signal) == 0 && signal == SIGHUP) {
    if (live != nullptr) live->Reload();
  }
  if (live != nullptr) live->Stop();  // no model changes while draining
  return signal;
}

// Lets requests in flight finish for up to --shutdown_timeout, then stops every listener.
void Drain(int signal, grpc::Server* server, grpc::HealthCheckServiceInterface* health,
           TranslatorService* service, std::unique_ptr<HttpServer> http_server,
           DocumentJobs* documents, ModelRegistry* registry) {
  const absl::Duration timeout = absl::GetFlag(FLAGS_shutdown_timeout);
  std::printf("glossa-server: %s: draining (up to %s)\n", strsignal(signal),
              absl::FormatDuration(timeout).c_str());
  std::fflush(stdout);
  health->Shutdown();        // every service reports NOT_SERVING from now on
  service->StartDraining();  // HTTP requests too get UNAVAILABLE (503) from now on
  const absl::Time deadline = absl::Now() + timeout;
  // HTTP requests in progress are answered before HTTP stops (a stopped civetweb cannot write),
  // alongside gRPC's; the engines finish (or, past the deadline, end) the jobs of both.
  std::thread http_stop([&http_server, deadline] {
    if (http_server == nullptr) return;
    http_server->Drain(deadline + absl::Seconds(10));  // the jobs end by the deadline
    http_server.reset();
  });
  // Queued documents fail at once; those in translation are cancelled at the deadline.
  std::thread documents_stop([documents, deadline] { documents->Shutdown(deadline); });
  server->Shutdown(absl::ToChronoTime(deadline));  // waits for in-flight calls, then cancels
  registry->Shutdown(deadline);
  documents_stop.join();
  http_stop.join();
  std::printf("glossa-server: stopped\n");
}

// The metrics endpoint runs on prometheus-cpp's own civetweb server, whose stop waits for up to
// 2 s as HTTP's would: woken the same way (WakeForStop), it stops at once.
void StopMetrics(std::unique_ptr<MetricsServer> metrics) {
  if (metrics == nullptr) return;
  glossa::server::WakeForStop(metrics->port());
  metrics.reset();
}

int Fail(const absl::Status& status) {
  std::cerr << "glossa-server: " << status.message() << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  glossa::UsePassiveOmpWait(argv);
  const CommandLine line = ParseCommandLine(argc, argv);
  const sigset_t signals = BlockSignals(/*reload=*/!absl::GetFlag(FLAGS_model_config).empty());

  auto defaults = DefaultsFromFlags();
  if (!defaults.ok()) return Fail(defaults.status());
  auto specs = ModelSpecs(*defaults, argv[0]);
  if (!specs.ok()) return Fail(specs.status());
  auto clients = ClientTokensFromFlags();
  if (!clients.ok()) return Fail(clients.status());
  auto quota = GrpcQuotaFromFlags();
  if (!quota.ok()) return Fail(quota.status());
  if (UnloadsModels(*specs)) glossa::ReturnFreedMemory();
  auto registry = LoadModels(*specs);
  if (!registry.ok()) return Fail(registry.status());

  RequestMetrics request_metrics(ModelNames(**registry), clients->names());
  request_metrics.SetLogRequests(absl::GetFlag(FLAGS_log_requests));
  TranslatorService service(registry->get(), LimitsFromFlags(), &request_metrics);
  service.RequireTokens(*std::move(clients));
  std::unique_ptr<ResultCache> cache = CacheFromFlags();
  service.SetCache(cache.get());
  const DocumentTranslator translator(&service, DocumentOptionsFromFlags());
  std::unique_ptr<DocumentJobs> documents = DocumentJobsFromFlags(&translator);
  auto metrics = StartMetrics(registry->get(), &request_metrics, cache.get(), documents.get(),
                              line.metrics_listen_given);
  if (!metrics.ok()) return Fail(metrics.status());
  auto credentials = ServerCredentials();
  if (!credentials.ok()) return Fail(credentials.status());
  auto glossaries = OpenGlossaries(service);
  if (!glossaries.ok()) return Fail(glossaries.status());
  service.SetPivotLanguage(absl::GetFlag(FLAGS_pivot_language));
  ServeDocuments(&service, documents.get());
  auto http = StartHttp(&service, glossaries->get(), documents.get(), line.http_listen_given,
                        specs->demo);
  if (!http.ok()) return Fail(http.status());
  GlossaryServiceImpl glossary_service(glossaries->get(), &service);
  UnknownMethodService unknown_methods;
  int port = 0;
  auto server =
      StartGrpc({&service, &glossary_service}, *credentials, &unknown_methods, *quota, &port);
  if (!server.ok()) return Fail(server.status());

  grpc::HealthCheckServiceInterface* health = (*server)->GetHealthCheckService();
  ReportServing(health, **registry);
  std::unique_ptr<LiveModels> live =
      FollowModelConfig(registry->get(), *defaults, health, &request_metrics);
  PrintHowToCall(port, **registry, specs->demo, argv[0]);

  const int signal = WaitForStopSignal(signals, live.get());
  Drain(signal, server->get(), health, &service, std::move(http->server), documents.get(),
        registry->get());
  StopMetrics(*std::move(metrics));
  return 0;
}
