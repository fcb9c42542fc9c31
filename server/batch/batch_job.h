// One glossa-batch run over a file (or a shard of it): read lines, send them in requests of a few
// segments to the servers with several requests in flight, put the answers back in input order,
// write them, journal the progress, report it.
//
//   reader (main thread) ──batches──> workers (--concurrency threads, blocking Translate calls)
//        ^                                     │
//        └── reorder buffer <──results─────────┘    the writer (main thread) writes batch k only
//                                                   after batches 0..k-1; at most 4 batches per
//                                                   worker are read ahead, so memory stays bounded
#ifndef GLOSSA_SERVER_BATCH_BATCH_JOB_H_
#define GLOSSA_SERVER_BATCH_BATCH_JOB_H_

#include <string>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "server/batch/client/client.h"
#include "server/batch/io/formats.h"
#include "server/batch/io/input.h"

namespace glossa::batch {

// Exit codes of glossa-batch.
constexpr int kExitOk = 0;       // every segment translated
constexpr int kExitFailed = 1;   // the output is complete, but some segments failed for good
constexpr int kExitUsage = 2;    // bad flags, unreadable input, a journal of another job, ...
constexpr int kExitStopped = 3;  // stopped before the end (servers unreachable, SIGTERM, ...):
                                 // the output is a correct prefix; --resume continues it

struct JobOptions {
  std::string input;
  std::string output;
  FormatOptions format;
  Shard shard;
  int concurrency = 8;  // requests in flight
  int texts_per_request = 16;
  bool resume = false;
  absl::Duration checkpoint_interval = absl::Seconds(1);
  absl::Duration progress_interval = absl::Seconds(5);
  // What besides the input and format makes the output what it is (model, decoding options):
  // recorded in the journal, which --resume only continues when it matches.
  nlohmann::json settings;
};

// Runs the job and returns the exit code; says why on stderr.
int RunJob(const JobOptions& options, TranslatorClient& client);

}  // namespace glossa::batch

#endif  // GLOSSA_SERVER_BATCH_BATCH_JOB_H_
