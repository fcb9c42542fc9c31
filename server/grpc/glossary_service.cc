#include "server/grpc/glossary_service.h"

#include <google/protobuf/unknown_field_set.h>

#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/common/status_util.h"
#include "server/glossaries/glossary_formats.h"

namespace glossa::server {
namespace {

// CreateGlossaryRequest's fields entries_text and entries_format.
constexpr int kEntriesTextField = 5;
constexpr int kEntriesFormatField = 6;

// Why protobuf refused a CreateGlossaryRequest: when entries_text is not UTF-8, the line where
// it is not (the fields read as bytes, which protobuf does not check).
absl::Status WhyNotParsed(const std::string& bytes) {
  google::protobuf::UnknownFieldSet fields;
  std::string text, format = "tsv";
  bool text_is_utf8 = true;
  if (fields.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    for (int i = 0; i < fields.field_count(); ++i) {
      const google::protobuf::UnknownField& field = fields.field(i);
      if (field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) continue;
      if (field.number() == kEntriesTextField) text = field.length_delimited();
      if (field.number() == kEntriesFormatField) format = field.length_delimited();
    }
    text_is_utf8 = IsUtf8(text);
  }
  absl::StatusOr<GlossaryFormat> parsed_format = ParseGlossaryFormat(format);
  if (!text_is_utf8 && parsed_format.ok()) {
    absl::Status entries = ParseGlossaryEntries(text, *parsed_format).status();
    if (!entries.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "entries_text (", GlossaryFormatName(*parsed_format), "): ", entries.message()));
    }
  }
  return absl::InvalidArgumentError(
      "the request is not a valid glossa.v1.CreateGlossaryRequest (every string must be UTF-8)");
}

template <typename Message>
absl::Status ParseRequest(const grpc::ByteBuffer& buffer, Message* message) {
  if (!buffer.Valid()) return absl::CancelledError("the call ended before its request arrived");
  grpc::Slice slice;
  if (!buffer.DumpToSingleSlice(&slice).ok()) {
    return absl::InvalidArgumentError("the request could not be read");
  }
  if (message->ParseFromArray(slice.begin(), static_cast<int>(slice.size()))) {
    return absl::OkStatus();
  }
  if constexpr (std::is_same_v<Message, v1::CreateGlossaryRequest>) {
    return WhyNotParsed(std::string(reinterpret_cast<const char*>(slice.begin()), slice.size()));
  }
  return absl::InvalidArgumentError(absl::StrCat("the request is not a valid ",
                                                 Message::descriptor()->full_name(),
                                                 " (every string must be UTF-8)"));
}

// A unary call answered at once: the token checked, the request parsed, `handle` run.
template <typename Request, typename Response>
grpc::ServerUnaryReactor* Answer(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer& request_buffer,
    grpc::ByteBuffer* response_buffer, const TranslatorService& translator,
    const std::function<absl::StatusOr<Response>(const Request&)>& handle) {
  absl::StatusOr<Response> response = [&]() -> absl::StatusOr<Response> {
    if (absl::Status auth = translator.Authenticate(*context); !auth.ok()) return auth;
    Request request;
    if (absl::Status parsed = ParseRequest(request_buffer, &request); !parsed.ok()) {
      return parsed;
    }
    return handle(request);
  }();
  grpc::Status status = grpc::Status::OK;
  if (response.ok()) {
    bool own = false;
    status = grpc::SerializationTraits<Response>::Serialize(*response, response_buffer, &own);
  } else {
    status = ToGrpcStatus(response.status());
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace

v1::GetGlossaryResponse GlossaryResponse(const Glossary& glossary) {
  v1::GetGlossaryResponse response;
  *response.mutable_glossary() = glossary.info;
  response.mutable_entries()->Reserve(static_cast<int>(glossary.entries.size()));
  for (const v1::GlossaryEntry& entry : glossary.entries) *response.add_entries() = entry;
  return response;
}

grpc::ServerUnaryReactor* GlossaryServiceImpl::CreateGlossary(grpc::CallbackServerContext* context,
                                                              const grpc::ByteBuffer* request,
                                                              grpc::ByteBuffer* response) {
  return Answer<v1::CreateGlossaryRequest, v1::GlossaryInfo>(
      context, *request, response, *translator_,
      [this](const v1::CreateGlossaryRequest& r) { return store_->Create(r); });
}

grpc::ServerUnaryReactor* GlossaryServiceImpl::ListGlossaries(grpc::CallbackServerContext* context,
                                                              const grpc::ByteBuffer* request,
                                                              grpc::ByteBuffer* response) {
  return Answer<v1::ListGlossariesRequest, v1::ListGlossariesResponse>(
      context, *request, response, *translator_,
      [this](const v1::ListGlossariesRequest&) -> absl::StatusOr<v1::ListGlossariesResponse> {
        v1::ListGlossariesResponse list;
        for (v1::GlossaryInfo& info : store_->List()) *list.add_glossaries() = std::move(info);
        return list;
      });
}

grpc::ServerUnaryReactor* GlossaryServiceImpl::GetGlossary(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return Answer<v1::GetGlossaryRequest, v1::GetGlossaryResponse>(
      context, *request, response, *translator_,
      [this](const v1::GetGlossaryRequest& r) -> absl::StatusOr<v1::GetGlossaryResponse> {
        absl::StatusOr<std::shared_ptr<const Glossary>> glossary = store_->Find(r.glossary_id());
        if (!glossary.ok()) return glossary.status();
        return GlossaryResponse(**glossary);
      });
}

grpc::ServerUnaryReactor* GlossaryServiceImpl::DeleteGlossary(grpc::CallbackServerContext* context,
                                                              const grpc::ByteBuffer* request,
                                                              grpc::ByteBuffer* response) {
  return Answer<v1::DeleteGlossaryRequest, v1::DeleteGlossaryResponse>(
      context, *request, response, *translator_,
      [this](const v1::DeleteGlossaryRequest& r) -> absl::StatusOr<v1::DeleteGlossaryResponse> {
        if (absl::Status deleted = store_->Delete(r.glossary_id()); !deleted.ok()) return deleted;
        return v1::DeleteGlossaryResponse();
      });
}

}  // namespace glossa::server
