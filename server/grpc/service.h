// The gRPC Translator service (callback API: no thread per request). Each RPC validates the
// request, submits one job to the model's engine, and answers from the engine's callbacks; a
// client that cancels or whose deadline passes stops its job within one decoder step.
#ifndef GLOSSA_SERVER_GRPC_SERVICE_H_
#define GLOSSA_SERVER_GRPC_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>

#include <grpcpp/generic/async_generic_service.h>

#include "glossa/v1/translator.grpc.pb.h"
#include "server/common/client_tokens.h"
#include "server/glossaries/glossary_store.h"
#include "server/metrics/metrics.h"
#include "server/models/model_registry.h"
#include "server/request/glossary_cache.h"
#include "server/request/request.h"
#include "server/cache/result_cache.h"
#include "server/grpc/translate_run.h"

namespace glossa::server {

// Every method takes its request as raw bytes: Translate and TranslateStream so that invalid
// UTF-8 gets INVALID_ARGUMENT from Glossa (see raw_request.proto), all of them so that a request
// protobuf cannot parse gets INVALID_ARGUMENT with a message; with typed methods gRPC answers a
// parse failure with UNIMPLEMENTED and no message.
using TranslatorBase = v1::Translator::WithRawCallbackMethod_Translate<
    v1::Translator::WithRawCallbackMethod_TranslateStream<
        v1::Translator::WithRawCallbackMethod_ListModels<
            v1::Translator::WithRawCallbackMethod_TranslateDocument<
                v1::Translator::CallbackService>>>>;

class TranslatorService final : public TranslatorBase {
 public:
  // metrics: where every RPC's outcome is recorded (may be null: nothing is recorded).
  TranslatorService(const ModelRegistry* registry, RequestLimits limits,
                    RequestMetrics* metrics = nullptr);

  grpc::ServerUnaryReactor* Translate(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* TranslateStream(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  // Starts the document handler's work and finishes the call when it ends; a client that
  // cancels the call (or goes away) cancels the document.
  grpc::ServerUnaryReactor* TranslateDocument(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) override;

  // TranslateDocument's work, done in server/jobs/ (a room above this one): starts a file's
  // translation by the deadline, the record told its model; `done` is then called once, on
  // another thread, with the result. Returns what cancels it, or the error that kept it from
  // starting (RESOURCE_EXHAUSTED: too many documents). Not set: UNIMPLEMENTED.
  using DocumentDone = std::function<void(absl::StatusOr<v1::TranslateDocumentResponse>)>;
  using DocumentHandler = std::function<absl::StatusOr<std::function<void()>>(
      v1::TranslateDocumentRequest, absl::Time, RpcRecord*, DocumentDone)>;
  void SetDocumentHandler(DocumentHandler handler) { document_handler_ = std::move(handler); }

  // From now on new requests get UNAVAILABLE; in-flight ones continue.
  void StartDraining() { draining_.store(true); }
  // Requires a client's token, as "authorization: Bearer <token>" metadata, on Translate,
  // TranslateStream, TranslateDocument and ListModels (health and reflection stay open for
  // probes). No clients: no check.
  void RequireTokens(ClientTokens clients) { clients_ = std::move(clients); }
  bool RequiresToken() const { return !clients_.empty(); }
  const ClientTokens& clients() const { return clients_; }
  // OK, or UNAUTHENTICATED when a token is required and the call presents no client's. Tells
  // `record` (if not null) the client.
  absl::Status Authenticate(const grpc::CallbackServerContext& context,
                            RpcRecord* record = nullptr) const;
  // The same check for other transports (HTTP): `token` is what the client presented. The
  // client's id (ClientTokens::Find; 0 when no token is required), told to `record` too.
  absl::StatusOr<int> Identify(absl::string_view token, RpcRecord* record = nullptr) const;
  absl::Status CheckToken(absl::string_view token, RpcRecord* record = nullptr) const {
    return Identify(token, record).status();
  }

  // Authentication and parsing of a gRPC TranslateRequest (UNAVAILABLE while draining comes
  // before a parse failure); tells `record` the model the request names.
  absl::StatusOr<v1::TranslateRequest> Parse(const grpc::CallbackServerContext& context,
                                             const grpc::ByteBuffer& request,
                                             RpcRecord* record) const;
  // Parsing and validation shared by both translation RPCs (UNAVAILABLE while draining). Tells
  // `record` the model the request names (even when it fails) and keeps the texts in `texts`.
  // The request is routed first (one model: TranslateStream does not pivot); with source
  // "auto", `detected` (if not null) gets the text's language.
  absl::StatusOr<PreparedRequest> Prepare(const grpc::CallbackServerContext& context,
                                          const grpc::ByteBuffer& request, bool stream,
                                          RpcRecord* record, std::vector<std::string>* texts,
                                          DetectedLanguage* detected = nullptr) const;
  // Prepare's checks of a parsed request.
  absl::StatusOr<PreparedRequest> PrepareParsed(const v1::TranslateRequest& request, bool stream,
                                                RpcRecord* record, std::vector<std::string>* texts,
                                                DetectedLanguage* detected = nullptr) const;

  // The unary translation behind gRPC's Translate and the HTTP API, transport-neutral: validates
  // and routes `request` (UNAVAILABLE while draining; tells `record` the model) and returns the
  // run whose end builds the response, records the result in `record` (which must outlive the
  // run; the caller finishes it) and calls `done` once. Nothing runs until the caller starts it
  // (TranslateRun::Start); when that fails, `done` is never called.
  absl::StatusOr<std::shared_ptr<TranslateRun>> NewTranslateJob(const v1::TranslateRequest& request,
                                                                absl::Time deadline,
                                                                RpcRecord* record,
                                                                TranslateRun::Done done) const;
  // The language that joins two models when none translates a request's pair (empty: none).
  void SetPivotLanguage(std::string language) { pivot_language_ = std::move(language); }
  const std::string& pivot_language() const { return pivot_language_; }
  // ListModels' answer, for any transport (the caller authenticates).
  v1::ListModelsResponse Models() const;
  RequestMetrics* metrics() const { return metrics_; }
  // The result cache (null: none). Must outlive the service.
  void SetCache(ResultCache* cache) { cache_ = cache; }
  ResultCache* cache() const { return cache_; }
  // The stored glossaries that TranslateRequest.glossary_id names (null: none), each compiled
  // once for requests (GlossaryCache). Must outlive the service.
  void SetGlossaries(const GlossaryStore* store) {
    glossaries_ = store == nullptr ? nullptr : std::make_unique<GlossaryCache>(store);
  }
  const ModelRegistry& registry() const { return *registry_; }

 private:
  const ModelRegistry* registry_;
  RequestLimits limits_;
  RequestMetrics* metrics_;
  ResultCache* cache_ = nullptr;
  std::unique_ptr<const GlossaryCache> glossaries_;
  absl::StatusOr<v1::ListModelsResponse> ListModels(const grpc::CallbackServerContext& context,
                                                     const grpc::ByteBuffer& request,
                                                     RpcRecord* record) const;
  void AddPivotPairs(v1::ListModelsResponse* response) const;

  absl::StatusOr<v1::TranslateDocumentRequest> ParseDocument(
      const grpc::CallbackServerContext& context, const grpc::ByteBuffer& buffer,
      RpcRecord* record) const;
  DocumentHandler document_handler_;

  std::atomic<bool> draining_{false};
  ClientTokens clients_;
  std::string pivot_language_ = "en";
};

// Answers calls to methods the server does not have (a wrong service or method name, or a
// client built from another proto) with UNIMPLEMENTED and a message naming what it has, where
// gRPC alone gives no message.
class UnknownMethodService final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;
};

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_GRPC_SERVICE_H_
