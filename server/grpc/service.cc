#include "server/grpc/service.h"

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "engine/document.h"
#include "server/common/status_util.h"
#include "server/models/router.h"
#include "text/languages.h"
#include "util/status_macros.h"

namespace glossa::server {
namespace {

absl::Time Deadline(const grpc::CallbackServerContext* context) {
  const auto deadline = context->deadline();
  if (deadline >= std::chrono::system_clock::time_point::max() - std::chrono::hours(24 * 365)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

template <typename Message>
grpc::ByteBuffer Serialize(const Message& message) {
  grpc::ByteBuffer buffer;
  bool own = false;
  grpc::SerializationTraits<Message>::Serialize(message, &buffer, &own);
  return buffer;
}

// Stops the job of a call gRPC cancelled (the client cancelled or went away) — unless the
// call's deadline passed: gRPC cancels those too, but the engine ends a late job by itself within
// one step, with DEADLINE_EXCEEDED, so that the expiry is counted as one (glossa_requests_total
// code, glossa_deadline_exceeded_total) and not as a cancellation. The margin covers the clocks
// of gRPC's timer and ours, and the client's own deadline: the server's copy starts when the call
// reaches it, later than the client's by the call's time in transit and in gRPC's queues, so a
// client whose deadline passes first sends a cancellation up to that much before the server's
// deadline (under the soak test's load, at least 117 of 633 client deadlines did with a 5 ms
// margin). A true cancellation within the margin runs on until the deadline, at most this long.
constexpr auto kDeadlineMargin = std::chrono::milliseconds(50);

template <typename Cancellable>  // a Job or a TranslateRun
void CancelUnlessExpired(Cancellable* job, const grpc::CallbackServerContext* context) {
  if (job == nullptr) return;
  const auto now = std::chrono::system_clock::now();
  if (context->deadline() <= now + kDeadlineMargin) return;
  job->Cancel();
}

// Unary Translate: answers once, when the engine finishes the job.
class TranslateCall final : public grpc::ServerUnaryReactor {
 public:
  TranslateCall(const TranslatorService& service, grpc::CallbackServerContext* context,
                const grpc::ByteBuffer& request, grpc::ByteBuffer* response)
      : context_(context), record_(service.metrics(), Method::kTranslate) {
    auto parsed = service.Parse(*context, request, &record_);
    if (!parsed.ok()) {
      End(ToGrpcStatus(parsed.status()));
      return;
    }
    if (service.registry().AllLoaded()) {
      Begin(service, *parsed, response);
      return;
    }
    // A model may have to load first: not on this thread, one of the few that run every
    // call's callbacks.
    std::thread([this, &service, request = *std::move(parsed), response] {
      Begin(service, request, response);
    }).detach();
  }
  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    CancelUnlessExpired(run_.get(), context_);
  }
  void OnDone() override { delete this; }

 private:
  void Begin(const TranslatorService& service, const v1::TranslateRequest& request,
             grpc::ByteBuffer* response) {
    auto job = service.NewTranslateJob(
        request, Deadline(context_), &record_,
        [this, response](absl::StatusOr<v1::TranslateResponse> result) {
          if (!result.ok()) {
            End(ToGrpcStatus(result.status()));
            return;
          }
          *response = Serialize(*result);
          End(grpc::Status::OK);  // the reactor may be gone after this line
        });
    if (!job.ok()) {
      End(ToGrpcStatus(job.status()));
      return;
    }
    std::shared_ptr<TranslateRun> run = *std::move(job);
    {
      std::lock_guard<std::mutex> lock(mu_);
      run_ = run;
      if (cancelled_) CancelUnlessExpired(run.get(), context_);
    }
    const absl::Status started = run->Start();
    if (!started.ok()) End(ToGrpcStatus(started));
  }
  // Every way this RPC ends: its outcome is recorded, then the RPC finishes.
  void End(const grpc::Status& status) {
    record_.Finish(status);
    Finish(status);
  }

  const grpc::CallbackServerContext* context_;
  RpcRecord record_;
  // std::mutex: ThreadSanitizer sees its ordering (Debian's Abseil is not instrumented).
  std::mutex mu_;
  std::shared_ptr<TranslateRun> run_;  // guarded by mu_
  bool cancelled_ = false;             // guarded by mu_
};

// TranslateStream: a message per newly certain piece of text, then a last one with the result.
class StreamCall final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  StreamCall(const TranslatorService& service, grpc::CallbackServerContext* context,
             const grpc::ByteBuffer& request)
      : service_(service), context_(context),
        record_(service.metrics(), Method::kTranslateStream) {
    auto parsed = service.Parse(*context, request, &record_);
    if (!parsed.ok()) {
      End(ToGrpcStatus(parsed.status()));
      return;
    }
    if (service.registry().AllLoaded()) {
      Route(*parsed);
      return;
    }
    // A model may have to load first: not on this thread, one of the few that run every
    // call's callbacks.
    std::thread([this, request = *std::move(parsed)] { Route(request); }).detach();
  }

  void Route(const v1::TranslateRequest& request) {
    auto routed = RouteRequest(request, service_.registry(), service_.pivot_language());
    if (routed.ok() && routed->parts.size() == 1 && !routed->parts.front().pivot.empty()) {
      if (!routed->detected.empty()) detected_ = routed->detected.front();
      FirstHop(routed->parts.front());
    } else {
      Stream(request);  // reports a routing error too
    }
  }

  // Through a pivot: the first hop translates the text at once (Translate's way), then the
  // second hop streams.
  void FirstHop(const RoutedPart& part) {
    record_.SetPivoted();
    counted_model_ = part.request.model();
    v1::TranslateRequest second = part.second;
    auto run = service_.NewTranslateJob(
        part.request, Deadline(context_), &record_,
        [this, second](absl::StatusOr<v1::TranslateResponse> first) mutable {
          if (!first.ok()) {
            End(ToGrpcStatus(first.status()));
            return;
          }
          const v1::Translation& t = first->translations(0);
          second.add_texts(t.hypotheses_size() > 0 ? t.hypotheses(0).text() : std::string());
          {
            // Lets go of the first model (the run holds it), which a load may unload; the
            // run itself lives until this callback returns.
            absl::MutexLock lock(&mu_);
            first_hop_.reset();
          }
          if (service_.registry().AllLoaded()) {
            Stream(second);
            return;
          }
          // The second model may have to load: not on the first model's worker thread, whose
          // other requests would wait for the load.
          std::thread([this, second = std::move(second)] { Stream(second); }).detach();
        });
    if (!run.ok()) {
      End(ToGrpcStatus(run.status()));
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      first_hop_ = *run;
    }
    if (absl::Status started = (*run)->Start(); !started.ok()) End(ToGrpcStatus(started));
  }

  // The streamed translation of `request` by one model.
  void Stream(const v1::TranslateRequest& request) {
    auto prepared =
        service_.PrepareParsed(request, /*stream=*/true, &record_, &texts_, &detected_);
    if (!counted_model_.empty()) record_.SetModel(counted_model_);  // a pivot's first hop
    if (!prepared.ok()) {
      End(ToGrpcStatus(prepared.status()));
      return;
    }
    p_ = std::make_shared<PreparedRequest>(*std::move(prepared));
    if (p_->sources.sources.empty()) {  // the text is empty
      Complete(DetokenizeResults(*p_->model->model, p_->sources, {}).front());
      return;
    }
    ResultCache* cache = service_.cache();
    std::vector<std::optional<Translation>> cached = TakeCached(cache, texts_, p_.get());
    if (cached.front()) {  // one message with the whole text
      Complete(*cached.front());
      return;
    }
    // The client knows its target prefix: the pieces stream the completion.
    sent_tokens_ = p_->search.prefix.size();
    sent_text_ = p_->model->model->tokenizer().DecodeTarget(p_->search.prefix);
    auto job = NewJob(*p_, Deadline(context_));
    job->on_tokens = [this](const std::vector<int>& stable) { OnTokens(stable); };
    job->on_done = [this, cache](JobResult result) {
      if (!result.ok()) {
        FinishWhenWritten(ToGrpcStatus(result.status()));
        return;
      }
      std::vector<Translation> translations =
          DetokenizeResults(*p_->model->model, p_->sources, *std::move(result));
      StoreAndMerge(cache, texts_, *p_, {}, &translations);
      Complete(translations.front());
    };
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) {  // while the first hop of a pivot ran
        job->Cancel();
      }
      job_ = job;
    }
    const absl::Status submitted = p_->model->engine->Submit(job);
    if (!submitted.ok()) End(ToGrpcStatus(submitted));
  }

  void OnWriteDone(bool ok) override {
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      pending_.pop_front();
      if (!ok) {  // the client went away
        CancelUnlessExpired(job_.get(), context_);
        pending_.clear();
      }
      if (!pending_.empty()) {
        StartWrite(&pending_.front());
      } else {
        writing_ = false;
        finish = final_status_;
      }
    }
    if (finish) End(*finish);  // outside the lock: OnDone may delete this
  }
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    CancelUnlessExpired(first_hop_.get(), context_);
    CancelUnlessExpired(job_.get(), context_);
  }
  void OnDone() override { delete this; }

 private:
  // Every way this RPC ends: its outcome is recorded, then the RPC finishes.
  void End(const grpc::Status& status) {
    record_.Finish(status);
    Finish(status);
  }

  // Runs on the engine's worker thread: sends the text the new certain tokens add.
  void OnTokens(const std::vector<int>& stable) {
    const std::string text = p_->model->model->tokenizer().DecodeTarget(stable);
    if (text.size() <= sent_text_.size() || text.compare(0, sent_text_.size(), sent_text_) != 0) {
      return;  // no new text yet (or detokenisation changed earlier text: wait for the end)
    }
    v1::TranslateStreamResponse message;
    message.set_text_piece(text.substr(sent_text_.size()));
    message.mutable_token_ids()->Add(stable.begin() + sent_tokens_, stable.end());
    sent_text_ = text;
    sent_tokens_ = stable.size();
    Send(message, std::nullopt);
  }

  void Complete(const Translation& result) {
    v1::TranslateStreamResponse message;
    const auto& best = result.hypotheses.front();
    if (best.text.compare(0, sent_text_.size(), sent_text_) == 0) {
      message.set_text_piece(best.text.substr(sent_text_.size()));
    }
    if (best.token_ids.size() > sent_tokens_) {
      message.mutable_token_ids()->Add(best.token_ids.begin() + sent_tokens_, best.token_ids.end());
    }
    message.set_done(true);
    ToProto(result, p_->return_scores, message.mutable_result());
    if (!detected_.language.empty()) {
      message.mutable_result()->set_detected_language(detected_.language);
      message.mutable_result()->set_detected_confidence(
          static_cast<int>(detected_.confidence + 0.5));
    }
    record_.SetResult(ResultOf(*p_, texts_, {result}));  // before Send: OnWriteDone may finish
    Send(message, grpc::Status::OK);
  }

  void FinishWhenWritten(grpc::Status status) {
    bool now;
    {
      absl::MutexLock lock(&mu_);
      final_status_ = status;
      now = !writing_;
    }
    if (now) End(status);
  }

  void Send(const v1::TranslateStreamResponse& message, std::optional<grpc::Status> then_finish) {
    absl::MutexLock lock(&mu_);
    if (then_finish) final_status_ = then_finish;
    pending_.push_back(Serialize(message));
    if (!writing_) {
      writing_ = true;
      StartWrite(&pending_.front());
    }
  }

  const TranslatorService& service_;
  const grpc::CallbackServerContext* context_;
  RpcRecord record_;
  std::vector<std::string> texts_;
  DetectedLanguage detected_;  // with source_language "auto"
  std::string counted_model_;  // through a pivot: the first hop's model, which metrics count
  std::shared_ptr<PreparedRequest> p_;
  std::string sent_text_;  // touched only by the worker thread, and by Complete after it
  size_t sent_tokens_ = 0;
  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> pending_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> final_status_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<TranslateRun> first_hop_ ABSL_GUARDED_BY(mu_);  // through a pivot
  std::shared_ptr<Job> job_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

TranslatorService::TranslatorService(const ModelRegistry* registry, RequestLimits limits,
                                     RequestMetrics* metrics)
    : registry_(registry), limits_(limits), metrics_(metrics) {}

absl::Status TranslatorService::Authenticate(const grpc::CallbackServerContext& context,
                                             RpcRecord* record) const {
  if (clients_.empty()) return absl::OkStatus();
  constexpr absl::string_view kBearer = "Bearer ";
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  const absl::string_view value =
      it == metadata.end() ? "" : absl::string_view(it->second.data(), it->second.size());
  if (absl::StartsWith(value, kBearer) && Identify(value.substr(kBearer.size()), record).ok()) {
    return absl::OkStatus();
  }
  return absl::UnauthenticatedError(
      "this server requires a bearer token: send the metadata 'authorization: Bearer <token>'");
}

absl::StatusOr<int> TranslatorService::Identify(absl::string_view token,
                                                RpcRecord* record) const {
  if (clients_.empty()) return 0;
  const int client = clients_.Find(token);
  if (client == 0) {
    return absl::UnauthenticatedError(
        "this server requires an API key (a client's bearer token)");
  }
  if (record != nullptr) record->SetClient(client);
  return client;
}

absl::StatusOr<v1::TranslateRequest> TranslatorService::Parse(
    const grpc::CallbackServerContext& context, const grpc::ByteBuffer& buffer,
    RpcRecord* record) const {
  if (absl::Status auth = Authenticate(context, record); !auth.ok()) return auth;
  if (!buffer.Valid()) {
    // No request message at all (a valid empty request is an empty but valid buffer): the
    // client cancelled, or its deadline passed, before the message arrived. Found by the soak
    // test, which saw such calls counted as INVALID_ARGUMENT that no client ever received.
    return absl::CancelledError("the call ended before its request arrived");
  }
  grpc::Slice slice;
  v1::TranslateRequest request;
  const bool parsed = buffer.DumpToSingleSlice(&slice).ok() &&
                      ParseTranslateRequest(slice.begin(), slice.size(), &request);
  if (parsed) record->SetModel(request.model());
  if (draining_.load()) {
    return absl::UnavailableError("the server is shutting down: retry on another replica");
  }
  if (!parsed) {
    return absl::InvalidArgumentError("the request is not a valid glossa.v1.TranslateRequest");
  }
  return request;
}

absl::StatusOr<PreparedRequest> TranslatorService::Prepare(
    const grpc::CallbackServerContext& context, const grpc::ByteBuffer& buffer, bool stream,
    RpcRecord* record, std::vector<std::string>* texts, DetectedLanguage* detected) const {
  GLOSSA_ASSIGN_OR_RETURN(v1::TranslateRequest request, Parse(context, buffer, record));
  return PrepareParsed(request, stream, record, texts, detected);
}

absl::StatusOr<PreparedRequest> TranslatorService::PrepareParsed(
    const v1::TranslateRequest& request, bool stream, RpcRecord* record,
    std::vector<std::string>* texts, DetectedLanguage* detected) const {
  record->SetModel(request.model());
  if (draining_.load()) {
    return absl::UnavailableError("the server is shutting down: retry on another replica");
  }
  GLOSSA_ASSIGN_OR_RETURN(RoutedRequest routed, RouteRequest(request, *registry_, pivot_language_));
  const RoutedPart& part = routed.parts.front();
  if (routed.parts.size() != 1 || !part.pivot.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TranslateStream translates with one model, and no single model translates this text's "
        "language into '", request.target_language(), "' (the route is ", part.route,
        "): use Translate, which goes through the pivot language"));
  }
  if (detected != nullptr && !routed.detected.empty()) *detected = routed.detected.front();
  GLOSSA_ASSIGN_OR_RETURN(PreparedRequest p, PrepareRequest(part.request, *registry_, limits_,
                                                            stream, glossaries_.get()));
  // What SetResult compares the translations with: the sentences when the texts were split.
  if (p.documents != nullptr) {
    *texts = p.documents->sentences;
  } else {
    texts->assign(request.texts().begin(), request.texts().end());
  }
  return p;
}

absl::StatusOr<std::shared_ptr<TranslateRun>> TranslatorService::NewTranslateJob(
    const v1::TranslateRequest& request, absl::Time deadline, RpcRecord* record,
    TranslateRun::Done done) const {
  record->SetModel(request.model());
  if (draining_.load()) {
    return absl::UnavailableError("the server is shutting down: retry on another replica");
  }
  RunContext context;
  context.registry = registry_;
  context.limits = limits_;
  context.glossaries = glossaries_.get();
  context.cache = cache_;
  context.pivot_language = pivot_language_;
  return TranslateRun::Create(context, request, deadline, record, std::move(done));
}

grpc::ServerUnaryReactor* TranslatorService::Translate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return new TranslateCall(*this, context, *request, response);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* TranslatorService::TranslateStream(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new StreamCall(*this, context, *request);
}

absl::StatusOr<v1::ListModelsResponse> TranslatorService::ListModels(
    const grpc::CallbackServerContext& context, const grpc::ByteBuffer& buffer,
    RpcRecord* record) const {
  if (absl::Status auth = Authenticate(context, record); !auth.ok()) return auth;
  if (!buffer.Valid()) return absl::CancelledError("the call ended before its request arrived");
  grpc::Slice slice;
  v1::ListModelsRequest request;
  if (!buffer.DumpToSingleSlice(&slice).ok() ||
      !request.ParseFromArray(slice.begin(), static_cast<int>(slice.size()))) {
    return absl::InvalidArgumentError("the request is not a valid glossa.v1.ListModelsRequest");
  }
  return Models();
}

void TranslatorService::AddPivotPairs(v1::ListModelsResponse* response) const {
  const CardMap models = registry_->cards();
  for (const auto& [source, targets] : PairsOf(models, pivot_language_).pivoted) {
    for (const std::string& target : targets) {
      auto route = RouteLanguages(models, source, target, pivot_language_);
      if (!route.ok()) continue;  // a code the models name differently (an ambiguous ISO code)
      v1::PivotPair* pair = response->add_pivot_pairs();
      pair->set_source_language(source);
      pair->set_target_language(target);
      pair->set_models(route->Name());
    }
  }
}

v1::ListModelsResponse TranslatorService::Models() const {
  v1::ListModelsResponse response;
  for (const auto& [name, entry] : registry_->catalogue()) {
    const ModelInfo& info = entry.card->info;
    const ModelConfig& c = info.config;
    v1::ModelInfo* m = response.add_models();
    m->set_name(name);
    m->set_state(ModelStateName(entry.state));
    m->set_resident_bytes(static_cast<uint64_t>(entry.resident_bytes));
    // The file path stays on the server (its log names it at startup): clients get the name.
    m->set_source_language(info.source_language);
    m->set_target_language(info.target_language);
    for (const std::string& code : SourceLanguages(info)) m->add_source_languages(code);
    for (const std::string& code : TargetLanguages(info, entry.card->target_prefix_tokens)) {
      m->add_target_languages(code);
    }
    m->set_architecture(c.architecture);
    m->set_dtype(info.dtype);
    m->set_source_vocab_size(c.source_vocab_size);
    m->set_target_vocab_size(c.target_vocab_size);
    m->set_encoder_layers(c.encoder_layers);
    m->set_decoder_layers(c.decoder_layers);
    m->set_d_model(c.d_model);
    m->set_attention_heads(c.encoder_heads);
    m->set_ffn_dim(c.encoder_ffn_dim);
    m->set_max_input_tokens(limits_.max_text_tokens > 0
                                ? std::min(limits_.max_text_tokens, c.max_positions)
                                : c.max_positions);
    // As the engine resolves it (Engine's MaxOutputTokens), loaded or not.
    const int limit = std::min(info.generation.max_length - 1, c.max_positions);
    const int asked = entry.card->spec.engine_options.max_output_tokens;
    m->set_max_output_tokens(asked <= 0 || asked > limit ? limit : asked);
  }
  AddPivotPairs(&response);
  return response;
}

grpc::ServerUnaryReactor* TranslatorService::ListModels(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  RpcRecord record(metrics_, Method::kListModels);
  absl::StatusOr<v1::ListModelsResponse> models = ListModels(*context, *request, &record);
  const grpc::Status status = models.ok() ? grpc::Status::OK : ToGrpcStatus(models.status());
  if (models.ok()) *response = Serialize(*models);
  record.Finish(status);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

absl::StatusOr<v1::TranslateDocumentRequest> TranslatorService::ParseDocument(
    const grpc::CallbackServerContext& context, const grpc::ByteBuffer& buffer,
    RpcRecord* record) const {
  if (draining_.load()) return absl::UnavailableError("the server is shutting down");
  if (absl::Status auth = Authenticate(context, record); !auth.ok()) return auth;
  if (!buffer.Valid()) return absl::CancelledError("the call ended before its request arrived");
  grpc::Slice slice;
  v1::TranslateDocumentRequest request;
  if (!buffer.DumpToSingleSlice(&slice).ok() ||
      !request.ParseFromArray(slice.begin(), static_cast<int>(slice.size()))) {
    return absl::InvalidArgumentError(
        "the request is not a valid glossa.v1.TranslateDocumentRequest");
  }
  if (!document_handler_) {
    return absl::UnimplementedError("this server was started without document translation");
  }
  return request;
}

namespace {

// What cancels a document, set once it has started; a cancel that comes first is kept for it.
class DocumentCancel {
 public:
  void Set(std::function<void()> cancel) {
    absl::MutexLock lock(&mu_);
    cancel_ = std::move(cancel);
    if (cancelled_) cancel_();
  }
  void Fire() {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (cancel_) cancel_();
  }

 private:
  absl::Mutex mu_;
  std::function<void()> cancel_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// TranslateDocument's call: finished when the document ends; a client's cancel reaches it.
class DocumentReactor final : public grpc::ServerUnaryReactor {
 public:
  std::shared_ptr<DocumentCancel> cancel() const { return cancel_; }
  void OnCancel() override { cancel_->Fire(); }
  void OnDone() override { delete this; }

 private:
  const std::shared_ptr<DocumentCancel> cancel_ = std::make_shared<DocumentCancel>();
};

}  // namespace

grpc::ServerUnaryReactor* TranslatorService::TranslateDocument(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  auto record = std::make_shared<RpcRecord>(metrics_, Method::kTranslateDocument);
  auto* reactor = new DocumentReactor();
  const std::shared_ptr<DocumentCancel> cancel = reactor->cancel();
  absl::StatusOr<v1::TranslateDocumentRequest> parsed =
      ParseDocument(*context, *request, record.get());
  absl::StatusOr<std::function<void()>> started = absl::UnknownError("not started");
  if (!parsed.ok()) {
    started = parsed.status();
  } else {
    record->SetModel(parsed->model());
    started = document_handler_(
        *std::move(parsed), Deadline(context), record.get(),
        [reactor, response, record](absl::StatusOr<v1::TranslateDocumentResponse> result) {
          if (result.ok()) *response = Serialize(*result);
          const grpc::Status status =
              result.ok() ? grpc::Status::OK : ToGrpcStatus(result.status());
          record->Finish(status);
          reactor->Finish(status);
        });
  }
  if (!started.ok()) {
    const grpc::Status status = ToGrpcStatus(started.status());
    record->Finish(status);
    reactor->Finish(status);
    return reactor;
  }
  cancel->Set(*std::move(started));
  return reactor;
}

grpc::ServerGenericBidiReactor* UnknownMethodService::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  class Reactor final : public grpc::ServerGenericBidiReactor {
   public:
    explicit Reactor(const std::string& method) {
      Finish(grpc::Status(
          grpc::StatusCode::UNIMPLEMENTED,
          absl::StrCat("this server has no method ", QuoteForMessage(method, 200),
                       "; it serves /glossa.v1.Translator/{Translate,TranslateStream,ListModels,"
                       "TranslateDocument}, "
                       "grpc.health.v1.Health and server reflection")));
    }
    void OnDone() override { delete this; }
  };
  return new Reactor(context->method());
}

}  // namespace glossa::server
