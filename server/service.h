// The gRPC Translator service (callback API: no thread per request). Each RPC validates the
// request, submits one job to the model's engine, and answers from the engine's callbacks; a
// client that cancels or whose deadline passes stops its job within one decoder step.
#ifndef GLOSSA_SERVER_SERVICE_H_
#define GLOSSA_SERVER_SERVICE_H_

#include <atomic>

#include "glossa/v1/translator.grpc.pb.h"
#include "server/model_registry.h"
#include "server/request.h"

namespace glossa::server {

class TranslatorService final : public v1::Translator::CallbackService {
 public:
  TranslatorService(const ModelRegistry* registry, RequestLimits limits);

  grpc::ServerUnaryReactor* Translate(grpc::CallbackServerContext* context,
                                      const v1::TranslateRequest* request,
                                      v1::TranslateResponse* response) override;
  grpc::ServerWriteReactor<v1::TranslateStreamResponse>* TranslateStream(
      grpc::CallbackServerContext* context, const v1::TranslateRequest* request) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;

  // From now on new requests get UNAVAILABLE; in-flight ones continue.
  void StartDraining() { draining_.store(true); }

  // Validation shared by both translation RPCs (UNAVAILABLE while draining).
  absl::StatusOr<PreparedRequest> Prepare(const v1::TranslateRequest& request, bool stream) const;

 private:
  const ModelRegistry* registry_;
  RequestLimits limits_;
  std::atomic<bool> draining_{false};
};

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_SERVICE_H_
