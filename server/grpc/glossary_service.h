// The gRPC GlossaryService: stored glossaries created, listed, read and deleted, over a
// GlossaryStore. Every call needs the Translator's bearer token when the server has one.
#ifndef GLOSSA_SERVER_GRPC_GLOSSARY_SERVICE_H_
#define GLOSSA_SERVER_GRPC_GLOSSARY_SERVICE_H_

#include <grpcpp/support/byte_buffer.h>

#include "glossa/v1/translator.grpc.pb.h"
#include "server/glossaries/glossary_store.h"
#include "server/grpc/service.h"

namespace glossa::server {

// Every method takes its request as raw bytes, as TranslatorService's do: a request protobuf
// cannot parse (a string that is not UTF-8) gets INVALID_ARGUMENT with a message where typed
// methods answer with no message; for entries_text, the message names the line.
using GlossaryServiceBase = v1::GlossaryService::WithRawCallbackMethod_CreateGlossary<
    v1::GlossaryService::WithRawCallbackMethod_ListGlossaries<
        v1::GlossaryService::WithRawCallbackMethod_GetGlossary<
            v1::GlossaryService::WithRawCallbackMethod_DeleteGlossary<
                v1::GlossaryService::CallbackService>>>>;

class GlossaryServiceImpl final : public GlossaryServiceBase {
 public:
  // store and translator (whose token the calls need) must outlive the service.
  GlossaryServiceImpl(GlossaryStore* store, const TranslatorService* translator)
      : store_(store), translator_(translator) {}

  grpc::ServerUnaryReactor* CreateGlossary(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListGlossaries(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetGlossary(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* DeleteGlossary(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;

 private:
  GlossaryStore* store_;
  const TranslatorService* translator_;
};

// GetGlossary's answer (the HTTP API's too).
v1::GetGlossaryResponse GlossaryResponse(const Glossary& glossary);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_GRPC_GLOSSARY_SERVICE_H_
