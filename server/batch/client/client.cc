#include "server/batch/client/client.h"

#include <chrono>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/batch/io/log.h"

namespace glossa::batch {
namespace {

namespace v1 = glossa::v1;

std::shared_ptr<grpc::Channel> NewChannel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetServiceConfigJSON(R"({"loadBalancingConfig":[{"round_robin":{}}]})");
  // Reconnect to a restarted server within seconds, not the default two minutes. (Not
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC uses it as the connect timeout, default 20 s, and a
  // short one fails every handshake with a busy server.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

// The reply must hold a translation with at least one hypothesis per text.
grpc::Status CheckReply(const v1::TranslateResponse& response, size_t texts) {
  bool ok = static_cast<size_t>(response.translations_size()) == texts;
  for (const v1::Translation& t : response.translations()) ok = ok && t.hypotheses_size() > 0;
  if (ok) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::DATA_LOSS,
                      absl::StrCat("the server answered ", response.translations_size(),
                                   " translations for ", texts, " texts"));
}

double Jitter() {
  thread_local std::mt19937 random(std::random_device{}());
  return std::uniform_real_distribution<double>(0.8, 1.2)(random);
}

}  // namespace

ErrorScope ScopeOf(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::ABORTED:
      return ErrorScope::kRetry;
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::DATA_LOSS:
      return ErrorScope::kJob;
    default:
      return ErrorScope::kSegment;
  }
}

absl::string_view CodeName(grpc::StatusCode code) {
  static const auto* names = new std::vector<std::string>([] {
    std::vector<std::string> v;
    for (int c = 0; c <= 16; ++c) v.push_back(absl::StatusCodeToString(absl::StatusCode(c)));
    return v;
  }());
  const int c = static_cast<int>(code);
  return c >= 0 && c <= 16 ? absl::string_view((*names)[c]) : absl::string_view("UNKNOWN_CODE");
}

absl::Duration Backoff(const RetryPolicy& policy, int retry, double jitter) {
  absl::Duration wait = policy.initial_backoff;
  for (int i = 1; i < retry && wait < policy.max_backoff; ++i) wait *= 2;
  return std::min(wait, policy.max_backoff) * jitter;
}

std::vector<std::string> SplitTargets(absl::string_view servers) {
  if (absl::StartsWith(servers, "ipv4:") || absl::StartsWith(servers, "ipv6:")) {
    return {std::string(servers)};
  }
  std::vector<std::string> targets;
  for (absl::string_view t : absl::StrSplit(servers, ',', absl::SkipWhitespace())) {
    targets.emplace_back(absl::StripAsciiWhitespace(t));
  }
  return targets;
}

TranslatorClient::TranslatorClient(const std::vector<std::string>& targets, ClientOptions options)
    : targets_(targets), options_(std::move(options)) {
  for (const std::string& target : targets_) {
    channels_.push_back(NewChannel(target));
    stubs_.push_back(v1::Translator::NewStub(channels_.back()));
  }
}

grpc::Status TranslatorClient::Translate(const std::vector<std::string>& texts,
                                         absl::string_view what, std::vector<TranslatedText>* out) {
  v1::TranslateRequest request;
  request.set_model(options_.model);
  request.set_source_language(options_.source_language);
  request.set_target_language(options_.target_language);
  request.set_split_sentences(options_.split_sentences);
  *request.mutable_options() = options_.decoding;
  request.set_priority(options_.priority);
  *request.mutable_glossary() = options_.glossary;
  for (const std::string& text : texts) request.add_texts(text);
  v1::TranslateResponse response;
  const grpc::Status status = WithRetries(what, [&](v1::Translator::Stub& stub,
                                                    grpc::ClientContext* context) {
    grpc::Status s = stub.Translate(context, request, &response);
    return s.ok() ? CheckReply(response, texts.size()) : s;
  });
  if (!status.ok()) return status;
  out->clear();
  for (const v1::Translation& t : response.translations()) {
    out->push_back({t.hypotheses(0).text(), t.hypotheses(0).token_ids_size()});
  }
  return status;
}

grpc::Status TranslatorClient::TranslateDocument(const std::string& file_name,
                                                 std::string content, absl::string_view what,
                                                 v1::TranslateDocumentResponse* out) {
  v1::TranslateDocumentRequest request;
  request.set_content(std::move(content));
  request.set_file_name(file_name);
  request.set_model(options_.model);
  request.set_source_language(options_.source_language);
  request.set_target_language(options_.target_language);
  return WithRetries(what, [&](v1::Translator::Stub& stub, grpc::ClientContext* context) {
    return stub.TranslateDocument(context, request, out);
  });
}

grpc::Status TranslatorClient::WithRetries(absl::string_view what, const Call& call) {
  grpc::Status status;
  size_t target = PickTarget();
  for (int attempt = 1;; ++attempt) {
    status = CallOnce(target, call);
    if (status.ok() || ScopeOf(status.error_code()) != ErrorScope::kRetry) break;
    if (attempt >= options_.retry.max_attempts) {
      Log(absl::StrCat(what, ": ", CodeName(status.error_code()), " (", status.error_message(),
                       ") from ", targets_[target], "; giving up after ", attempt, " attempts"));
      return status;
    }
    const absl::Duration wait = Backoff(options_.retry, attempt, Jitter());
    Log(absl::StrCat(what, ": ", CodeName(status.error_code()), " (", status.error_message(),
                     ") from ", targets_[target], "; retry ", attempt, "/",
                     options_.retry.max_attempts - 1, " in ",
                     absl::StrFormat("%.1f", absl::ToDoubleSeconds(wait)), " s"));
    target = PickTarget();
    if (!WaitBeforeRetry(target, wait)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "stopped");
    }
  }
  return status;
}

grpc::Status TranslatorClient::CallOnce(size_t target, const Call& call) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoMilliseconds(options_.timeout));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return grpc::Status(grpc::StatusCode::CANCELLED, "stopped");
    in_flight_.insert(&context);
  }
  const grpc::Status status = call(*stubs_[target], &context);
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.erase(&context);
  return status;
}

size_t TranslatorClient::PickTarget() {
  const size_t n = channels_.size();
  const size_t start = next_target_.fetch_add(1) % n;
  if (n == 1) return 0;
  // First choice: a connected target; second: one not known to be failing.
  for (const bool need_ready : {true, false}) {
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (start + k) % n;
      const grpc_connectivity_state state = channels_[i]->GetState(/*try_to_connect=*/true);
      if (need_ready ? state == GRPC_CHANNEL_READY : state != GRPC_CHANNEL_TRANSIENT_FAILURE) {
        return i;
      }
    }
  }
  return start;
}

bool TranslatorClient::WaitBeforeRetry(size_t target, absl::Duration duration) {
  const absl::Time end = absl::Now() + duration;
  for (absl::Time now = absl::Now(); now < end; now = absl::Now()) {
    const absl::Time slice_end = std::min(end, now + absl::Milliseconds(100));
    grpc::Channel& channel = *channels_[target];
    if (channel.GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) {
      if (!SleepUnlessStopped(slice_end - now)) return false;
    } else {
      channel.WaitForConnected(absl::ToChronoTime(slice_end));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  return !stopped_;
}

bool TranslatorClient::SleepUnlessStopped(absl::Duration duration) {
  std::unique_lock<std::mutex> lock(mu_);
  return !stop_cv_.wait_for(lock, absl::ToChronoMilliseconds(duration),
                            [this] { return stopped_; });
}

void TranslatorClient::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  for (grpc::ClientContext* context : in_flight_) context->TryCancel();
  stop_cv_.notify_all();
}

}  // namespace glossa::batch
