// glossa-load: the server under concurrent load, through real gRPC on loopback. Prints JSON.
//
// Closed loop (--clients 1,8,32,128): N clients, each sending one sentence at a time and the
// next as soon as the answer arrives, until the input has been sent --passes times (after an
// untimed warm-up with the same clients). Open loop (--rates R1,R2,...):
// sentences arrive as a Poisson process of R per second for --seconds, whatever the answers,
// to find the rate where p99 latency exceeds 1 s. By default the server runs in this process
// (the demo model), so the engine's own counters give the mean rows per decoder step; with
// --server the load goes to a running server instead.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "util/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench_util.h"
#include "glossa/v1/translator.grpc.pb.h"
#include "server/models/model_registry.h"
#include "server/grpc/service.h"

ABSL_FLAG(std::string, server, "", "Address of a running server; empty: start one in-process");
ABSL_FLAG(std::string, model, GLOSSA_DEMO_MODEL, "Model file for the in-process server");
ABSL_FLAG(std::string, input, GLOSSA_SHARED_DIR "/golden/dev.es", "Sentences, one per line");
ABSL_FLAG(int, limit, 0, "Use only the first N sentences (0: all)");
ABSL_FLAG(std::string, clients, "1,8,32,128",
          "Closed-loop runs: concurrent clients; 'none' for open-loop runs only");
ABSL_FLAG(std::string, priority, "interactive",
          "Admission lane of every request: interactive or batch (TranslateRequest.priority)");
ABSL_FLAG(std::string, rates, "", "Open-loop runs: Poisson arrival rates, sentences/s");
ABSL_FLAG(double, seconds, 20, "Length of each open-loop run");
ABSL_FLAG(int, passes, 1, "Closed-loop runs: times each client count goes through the input");
ABSL_FLAG(bool, warmup, true,
          "Before each closed-loop run, send 8 sentences per client untimed with the same "
          "clients, so that the server meets that load's batch sizes before the timing starts "
          "(oneDNN primitives are made on first use of each row count)");
ABSL_FLAG(int, beam_size, 1, "Beam size of every request");
ABSL_FLAG(int, max_output_tokens, 256, "max_output_tokens of every request");
ABSL_FLAG(int, deadline_ms, 0,
          "Deadline of every request, in ms after it is sent; 0: 5 minutes. With a deadline the "
          "report counts the requests answered within it and those answered DEADLINE_EXCEEDED");
ABSL_FLAG(bool, deadline_admission, true,
          "In-process server: early DEADLINE_EXCEEDED for requests that cannot finish in time, "
          "earliest deadline first (glossa-server --deadline_admission); false: arrival order");
ABSL_FLAG(int, workers, 1, "In-process server: engine workers (step loops)");
ABSL_FLAG(int, threads, 1, "In-process server: compute threads per engine worker");
ABSL_FLAG(int, max_active_sequences, 64, "In-process server: sentences decoded together");
ABSL_FLAG(std::string, compute_type, "",
          "In-process server: float32, bfloat16, int8 or int8_fast (as glossa-server "
          "--compute_type); empty: as the model file stores its weights");
ABSL_FLAG(bool, float32_output_layer, false,
          "In-process server: keep the output projection in float32 (as glossa-server)");

namespace v1 = glossa::v1;
using glossa::bench::Percentile;
using glossa::bench::Round;

namespace {

struct Sample {
  double seconds = 0;
  int tokens = 0;
  bool ok = false;
  grpc::StatusCode code = grpc::StatusCode::OK;
};

Sample Call(v1::Translator::Stub& stub, const std::string& text) {
  v1::TranslateRequest request;
  request.add_texts(text);
  request.mutable_options()->set_beam_size(absl::GetFlag(FLAGS_beam_size));
  request.mutable_options()->set_max_output_tokens(absl::GetFlag(FLAGS_max_output_tokens));
  request.set_priority(absl::GetFlag(FLAGS_priority) == "batch" ? v1::PRIORITY_BATCH
                                                                : v1::PRIORITY_INTERACTIVE);
  grpc::ClientContext context;
  const int deadline_ms = absl::GetFlag(FLAGS_deadline_ms);
  context.set_deadline(std::chrono::system_clock::now() +
                       (deadline_ms > 0 ? std::chrono::milliseconds(deadline_ms)
                                        : std::chrono::milliseconds(std::chrono::minutes(5))));
  v1::TranslateResponse response;
  const absl::Time start = absl::Now();
  const grpc::Status status = stub.Translate(&context, request, &response);
  Sample s;
  s.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  s.ok = status.ok();
  s.code = status.error_code();
  if (s.ok) {
    const auto& ids = response.translations(0).hypotheses(0).token_ids();
    s.tokens = ids.size() - (ids.empty() || ids[ids.size() - 1] != 0 ? 0 : 1);  // EOS (id 0) excluded
  }
  return s;
}

// Engine counters of the in-process server, to derive rows per decoder step.
struct StepCounters {
  int64_t steps = 0, rows = 0;
  int64_t refused_late = 0;  // jobs ended early: they could not finish in time
};

class Target {
 public:
  Target() {
    std::string address = absl::GetFlag(FLAGS_server);
    if (address.empty()) address = StartInProcess();
    channel_ = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    stub_ = v1::Translator::NewStub(channel_);
  }
  ~Target() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
    if (registry_) registry_->Shutdown(absl::Now());
  }
  v1::Translator::Stub& stub() { return *stub_; }
  StepCounters counters() const {
    StepCounters c;
    if (!registry_) return c;
    for (const auto& [name, m] : registry_->models()) {
      c.steps += m->engine->stats().steps;
      c.rows += m->engine->stats().step_rows;
      c.refused_late += m->engine->metrics().refused_late_total.load();
    }
    return c;
  }

 private:
  std::string StartInProcess() {
    glossa::EngineOptions options;
    options.workers = std::max(1, absl::GetFlag(FLAGS_workers));
    options.threads_per_worker = absl::GetFlag(FLAGS_threads);
    options.max_active_sequences = absl::GetFlag(FLAGS_max_active_sequences);
    options.max_active_rows = options.max_active_sequences * 4;
    options.deadline_admission = absl::GetFlag(FLAGS_deadline_admission);
    glossa::ModelOptions model_options;
    model_options.compute_type = absl::GetFlag(FLAGS_compute_type);
    model_options.float32_output_layer = absl::GetFlag(FLAGS_float32_output_layer);
    auto registry = glossa::server::ModelRegistry::Load({"demo=" + absl::GetFlag(FLAGS_model)},
                                                        options, model_options);
    if (!registry.ok()) {
      std::cerr << "glossa-load: " << registry.status() << "\n";
      std::exit(2);
    }
    registry_ = *std::move(registry);
    service_ = std::make_unique<glossa::server::TranslatorService>(registry_.get(),
                                                                  glossa::server::RequestLimits{});
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    return absl::StrCat("127.0.0.1:", port);
  }

  std::unique_ptr<glossa::server::ModelRegistry> registry_;
  std::unique_ptr<glossa::server::TranslatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Translator::Stub> stub_;
};

std::string Report(const std::string& kind, double knob, const std::vector<Sample>& samples,
                   double seconds, StepCounters before, StepCounters after) {
  std::vector<double> latencies, late_answers;
  int64_t tokens = 0, failed = 0;
  for (const Sample& s : samples) {
    if (!s.ok) {
      ++failed;
      if (s.code == grpc::StatusCode::DEADLINE_EXCEEDED) late_answers.push_back(s.seconds * 1000);
      continue;
    }
    latencies.push_back(s.seconds * 1000);
    tokens += s.tokens;
  }
  const int64_t steps = after.steps - before.steps;
  return absl::StrFormat(
      "    {\"mode\": \"%s\", \"%s\": %g, \"sentences\": %d, \"failed\": %d, \"target_tokens\": "
      "%d, \"seconds\": %g, \"target_tokens_per_s\": %g, \"sentences_per_s\": %g, "
      "\"latency_ms\": {\"p50\": %g, \"p90\": %g, \"p99\": %g, \"max\": %g}, "
      "\"deadline_exceeded\": %d, \"deadline_exceeded_answer_ms_p50\": %g, "
      "\"refused_early_by_server\": %d, "
      "\"mean_rows_per_step\": %g, \"load_average_1m\": %g}",
      kind, kind == "closed" ? "clients" : "rate", knob, samples.size(), failed, tokens,
      Round(seconds, 3), Round(tokens / seconds, 1), Round(latencies.size() / seconds, 2),
      Round(Percentile(latencies, 50), 1), Round(Percentile(latencies, 90), 1),
      Round(Percentile(latencies, 99), 1), Round(Percentile(latencies, 100), 1),
      late_answers.size(), Round(Percentile(late_answers, 50), 1),
      after.refused_late - before.refused_late,
      steps > 0 ? Round(static_cast<double>(after.rows - before.rows) / steps, 2) : -1.0,
      glossa::bench::LoadAverage());
}

// `clients` threads send sentences texts[i % texts.size()] for i < count, one at a time each.
std::vector<Sample> SendAll(Target& target, const std::vector<std::string>& texts, size_t count,
                            int clients) {
  std::vector<Sample> samples(count);
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      for (size_t i; (i = next++) < count;) {
        samples[i] = Call(target.stub(), texts[i % texts.size()]);
      }
    });
  }
  for (auto& t : threads) t.join();
  return samples;
}

std::string ClosedLoop(Target& target, const std::vector<std::string>& texts, int clients) {
  if (absl::GetFlag(FLAGS_warmup)) {
    SendAll(target, texts, 8 * static_cast<size_t>(clients), clients);
  }
  const size_t count = texts.size() * static_cast<size_t>(std::max(1, absl::GetFlag(FLAGS_passes)));
  const StepCounters before = target.counters();
  const absl::Time start = absl::Now();
  std::vector<Sample> samples = SendAll(target, texts, count, clients);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return Report("closed", clients, samples, seconds, before, target.counters());
}

std::string OpenLoop(Target& target, const std::vector<std::string>& texts, double rate) {
  std::mt19937 rng(7);
  std::exponential_distribution<double> gap(rate);
  const double duration = absl::GetFlag(FLAGS_seconds);
  std::vector<double> arrivals;
  for (double t = gap(rng); t < duration; t += gap(rng)) arrivals.push_back(t);
  std::vector<Sample> samples(arrivals.size());
  const StepCounters before = target.counters();
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    const absl::Time when = start + absl::Seconds(arrivals[i]);
    absl::SleepFor(when - absl::Now());
    threads.emplace_back([&, i] { samples[i] = Call(target.stub(), texts[i % texts.size()]); });
  }
  for (auto& t : threads) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return Report("open", rate, samples, seconds, before, target.counters());
}

}  // namespace

int main(int argc, char** argv) {
  glossa::SetUsage(
      "Loads a Glossa server with concurrent clients through gRPC and prints JSON.\n"
      "  glossa-load [--clients 1,8,32,128] [--rates 5,10,20] [--server HOST:PORT]");
  absl::ParseCommandLine(argc, argv);
  auto texts = glossa::bench::ReadLines(absl::GetFlag(FLAGS_input), absl::GetFlag(FLAGS_limit));
  if (!texts.ok() || texts->empty()) {
    std::cerr << "glossa-load: cannot read --input " << absl::GetFlag(FLAGS_input) << "\n";
    return 2;
  }
  const std::string client_list = absl::GetFlag(FLAGS_clients);
  auto clients = client_list == "none" ? absl::StatusOr<std::vector<int>>(std::vector<int>())
                                       : glossa::bench::ParseIntList("clients", client_list);
  if (!clients.ok()) {
    std::cerr << "glossa-load: " << clients.status().message() << "\n";
    return 2;
  }
  Target target;
  Call(target.stub(), (*texts)[0]);  // warm-up
  std::vector<std::string> runs;
  for (int n : *clients) {
    std::cerr << "glossa-load: " << n << " clients\n";
    runs.push_back(ClosedLoop(target, *texts, n));
  }
  if (!absl::GetFlag(FLAGS_rates).empty()) {
    auto rates = glossa::bench::ParseIntList("rates", absl::GetFlag(FLAGS_rates));
    if (!rates.ok()) {
      std::cerr << "glossa-load: " << rates.status().message() << "\n";
      return 2;
    }
    for (int r : *rates) {
      std::cerr << "glossa-load: " << r << " sentences/s (open loop)\n";
      runs.push_back(OpenLoop(target, *texts, r));
    }
  }
  const bool in_process = absl::GetFlag(FLAGS_server).empty();
  std::printf("{\n  \"input\": \"%s\",\n  \"sentences\": %zu,\n  \"beam_size\": %d,\n"
              "  \"workers\": %d,\n  \"threads\": %d,\n  \"compute_type\": \"%s\",\n"
              "  \"omp_wait_policy\": \"%s\",\n  \"cpu\": \"%s\",\n  \"runs\": [\n",
              absl::GetFlag(FLAGS_input).c_str(), texts->size(), absl::GetFlag(FLAGS_beam_size),
              in_process ? std::max(1, absl::GetFlag(FLAGS_workers)) : -1,
              in_process ? absl::GetFlag(FLAGS_threads) : -1,
              absl::GetFlag(FLAGS_compute_type).c_str(),
              std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "",
              glossa::bench::CpuModel().c_str());
  for (size_t i = 0; i < runs.size(); ++i) {
    std::printf("%s%s\n", runs[i].c_str(), i + 1 < runs.size() ? "," : "");
  }
  std::printf("  ]\n}\n");
  return 0;
}
