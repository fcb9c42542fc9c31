#include "server/service.h"

#include <deque>

#include "absl/synchronization/mutex.h"
#include "glossa/internal/raw_request.pb.h"
#include "absl/time/clock.h"
#include "server/status_util.h"

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

std::shared_ptr<Job> NewJob(const PreparedRequest& p, const grpc::CallbackServerContext* context) {
  auto job = std::make_shared<Job>();
  job->sources = p.sources.sources;
  job->search = p.search;
  job->deadline = Deadline(context);
  return job;
}

// Unary Translate: answers once, when the engine finishes the job.
class TranslateCall final : public grpc::ServerUnaryReactor {
 public:
  TranslateCall(const TranslatorService& service, grpc::CallbackServerContext* context,
                const grpc::ByteBuffer& request, grpc::ByteBuffer* response) {
    auto prepared = service.Prepare(request, /*stream=*/false);
    if (!prepared.ok()) {
      Finish(ToGrpcStatus(prepared.status()));
      return;
    }
    auto p = std::make_shared<PreparedRequest>(*std::move(prepared));
    job_ = NewJob(*p, context);
    job_->on_done = [this, p, response](JobResult result) {
      if (!result.ok()) {
        Finish(ToGrpcStatus(result.status()));
        return;
      }
      v1::TranslateResponse message;
      message.set_model(p->model->name);
      for (const Translation& t :
           DetokenizeResults(*p->model->model, p->sources, *std::move(result))) {
        ToProto(t, p->return_scores, message.add_translations());
      }
      *response = Serialize(message);
      Finish(grpc::Status::OK);  // the reactor may be gone after this line
    };
    const absl::Status submitted = p->model->engine->Submit(job_);
    if (!submitted.ok()) Finish(ToGrpcStatus(submitted));
  }
  void OnCancel() override {
    if (job_) job_->Cancel();
  }
  void OnDone() override { delete this; }

 private:
  std::shared_ptr<Job> job_;
};

// TranslateStream: a message per newly certain piece of text, then a last one with the result.
class StreamCall final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  StreamCall(const TranslatorService& service, grpc::CallbackServerContext* context,
             const grpc::ByteBuffer& request) {
    auto prepared = service.Prepare(request, /*stream=*/true);
    if (!prepared.ok()) {
      Finish(ToGrpcStatus(prepared.status()));
      return;
    }
    p_ = std::make_shared<PreparedRequest>(*std::move(prepared));
    if (p_->sources.sources.empty()) {  // the text is empty
      Complete(DetokenizeResults(*p_->model->model, p_->sources, {}).front());
      return;
    }
    job_ = NewJob(*p_, context);
    job_->on_tokens = [this](const std::vector<int>& stable) { OnTokens(stable); };
    job_->on_done = [this](JobResult result) {
      if (!result.ok()) {
        FinishWhenWritten(ToGrpcStatus(result.status()));
        return;
      }
      Complete(DetokenizeResults(*p_->model->model, p_->sources, *std::move(result)).front());
    };
    const absl::Status submitted = p_->model->engine->Submit(job_);
    if (!submitted.ok()) Finish(ToGrpcStatus(submitted));
  }

  void OnWriteDone(bool ok) override {
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      pending_.pop_front();
      if (!ok) {  // the client went away
        if (job_) job_->Cancel();
        pending_.clear();
      }
      if (!pending_.empty()) {
        StartWrite(&pending_.front());
      } else {
        writing_ = false;
        finish = final_status_;
      }
    }
    if (finish) Finish(*finish);  // outside the lock: OnDone may delete this
  }
  void OnCancel() override {
    if (job_) job_->Cancel();
  }
  void OnDone() override { delete this; }

 private:
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
    Send(message, grpc::Status::OK);
  }

  void FinishWhenWritten(grpc::Status status) {
    bool now;
    {
      absl::MutexLock lock(&mu_);
      final_status_ = status;
      now = !writing_;
    }
    if (now) Finish(status);
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

  std::shared_ptr<PreparedRequest> p_;
  std::shared_ptr<Job> job_;
  std::string sent_text_;  // touched only by the worker thread, and by Complete after it
  size_t sent_tokens_ = 0;
  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> pending_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

TranslatorService::TranslatorService(const ModelRegistry* registry, RequestLimits limits)
    : registry_(registry), limits_(limits) {}

absl::StatusOr<PreparedRequest> TranslatorService::Prepare(const grpc::ByteBuffer& buffer,
                                                           bool stream) const {
  if (draining_.load()) {
    return absl::UnavailableError("the server is shutting down: retry on another replica");
  }
  grpc::Slice slice;
  internal::RawTranslateRequest raw;
  if (!buffer.DumpToSingleSlice(&slice).ok() ||
      !raw.ParseFromArray(slice.begin(), static_cast<int>(slice.size()))) {
    return absl::InvalidArgumentError("the request is not a valid glossa.v1.TranslateRequest");
  }
  // A string field may hold any bytes in memory; only the parser insists on UTF-8.
  v1::TranslateRequest request;
  request.set_model(raw.model());
  for (const std::string& text : raw.texts()) request.add_texts(text);
  *request.mutable_options() = raw.options();
  return PrepareRequest(request, *registry_, limits_, stream);
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

grpc::ServerUnaryReactor* TranslatorService::ListModels(grpc::CallbackServerContext* context,
                                                        const v1::ListModelsRequest* request,
                                                        v1::ListModelsResponse* response) {
  for (const auto& [name, entry] : registry_->models()) {
    const ModelInfo& info = entry->model->info();
    const ModelConfig& c = info.config;
    v1::ModelInfo* m = response->add_models();
    m->set_name(name);
    m->set_path(entry->path);
    m->set_source_language(info.source_language);
    m->set_target_language(info.target_language);
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
    m->set_max_output_tokens(entry->engine->options().max_output_tokens);
  }
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace glossa::server
