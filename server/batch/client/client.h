// glossa-batch's side of the gRPC API: one channel per --server target, Translate calls with
// retries and backoff, and the rules for which errors are retried, which fail a segment and which
// stop the job.
#ifndef GLOSSA_SERVER_BATCH_CLIENT_CLIENT_H_
#define GLOSSA_SERVER_BATCH_CLIENT_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "glossa/v1/translator.grpc.pb.h"

namespace glossa::batch {

// What an error means for the texts of a failed call.
enum class ErrorScope {
  kRetry,    // transient (UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, ABORTED): try again
  kSegment,  // about the texts (INVALID_ARGUMENT, OUT_OF_RANGE, ...): retry one at a time; a
             // text that still fails has failed for good
  kJob,      // about the whole job (NOT_FOUND: unknown model, UNIMPLEMENTED, UNAUTHENTICATED,
             // PERMISSION_DENIED, CANCELLED, DATA_LOSS: a malformed reply): stop
};
ErrorScope ScopeOf(grpc::StatusCode code);
absl::string_view CodeName(grpc::StatusCode code);

struct RetryPolicy {
  int max_attempts = 10;  // calls per request, the first included
  absl::Duration initial_backoff = absl::Milliseconds(250);
  absl::Duration max_backoff = absl::Seconds(10);
};
// The wait before retry `retry` (1 = the first retry): initial * 2^(retry-1), capped, times
// `jitter` (0.8..1.2 in use, so that clients that failed together do not retry together).
absl::Duration Backoff(const RetryPolicy& policy, int retry, double jitter);

// The channel targets in --server: a comma-separated list of HOST:PORT or gRPC target URIs
// (dns:///name:port, ...). An ipv4:/ipv6: URI, whose addresses are themselves separated by
// commas, is one target.
std::vector<std::string> SplitTargets(absl::string_view servers);

struct ClientOptions {
  std::string model;
  std::string source_language, target_language;  // TranslateRequest's, empty: not sent
  glossa::v1::DecodingOptions decoding;
  glossa::v1::Priority priority = glossa::v1::PRIORITY_BATCH;
  bool split_sentences = false;  // TranslateRequest.split_sentences
  // TranslateRequest.glossary: terms every request must use (--glossary).
  google::protobuf::RepeatedPtrField<glossa::v1::GlossaryEntry> glossary;
  absl::Duration timeout = absl::Seconds(300);  // deadline of each call
  RetryPolicy retry;
};

struct TranslatedText {
  std::string text;
  int64_t tokens = 0;  // target tokens generated
};

// Thread-safe: workers share one client.
class TranslatorClient {
 public:
  // Every channel balances round-robin over the addresses its name resolves to (a dns:/// name of
  // a headless Kubernetes service: every pod).
  TranslatorClient(const std::vector<std::string>& targets, ClientOptions options);

  // Translates `texts` in one request. Transient errors are retried with backoff, each time on
  // the next target that is connected; `what` names the texts in the retry messages. Returns the
  // last error when retries run out, a non-transient error at once, CANCELLED after Stop().
  grpc::Status Translate(const std::vector<std::string>& texts, absl::string_view what,
                         std::vector<TranslatedText>* out);

  // Translates a file with TranslateDocument (the model and languages of the options), with
  // Translate's retries.
  grpc::Status TranslateDocument(const std::string& file_name, std::string content,
                                 absl::string_view what,
                                 glossa::v1::TranslateDocumentResponse* out);

  // Cancels the calls in progress and makes every later call return CANCELLED.
  void Stop();

 private:
  using Call = std::function<grpc::Status(glossa::v1::Translator::Stub&, grpc::ClientContext*)>;
  // `call` on the next target, retried on transient errors with backoff (Translate's rules).
  grpc::Status WithRetries(absl::string_view what, const Call& call);
  grpc::Status CallOnce(size_t target, const Call& call);
  // The next target in turn, preferring connected ones.
  size_t PickTarget();
  // Waits `duration` before a retry on `target`, connecting to it meanwhile: a blocking client
  // drives its connections only inside calls, so a plain sleep would leave a restarted server
  // unconnected while every call fails fast. False when stopped.
  bool WaitBeforeRetry(size_t target, absl::Duration duration);
  // Sleeps unless Stop() comes first; false when stopped.
  bool SleepUnlessStopped(absl::Duration duration);

  const std::vector<std::string> targets_;
  const ClientOptions options_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<glossa::v1::Translator::Stub>> stubs_;
  std::atomic<size_t> next_target_{0};

  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopped_ = false;                      // guarded by mu_
  std::set<grpc::ClientContext*> in_flight_;  // guarded by mu_
};

}  // namespace glossa::batch

#endif  // GLOSSA_SERVER_BATCH_CLIENT_CLIENT_H_
