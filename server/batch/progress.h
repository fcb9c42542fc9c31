// Progress lines on stderr: segments done/total, segments/s, tokens/s, ETA; and the summary.
#ifndef GLOSSA_SERVER_BATCH_PROGRESS_H_
#define GLOSSA_SERVER_BATCH_PROGRESS_H_

#include <cstdint>
#include <string>

namespace glossa::batch {

struct ProgressCounts {
  int64_t done = 0;      // segments in the output, earlier runs (before --resume) included
  int64_t total = 0;     // segments of the job (this shard)
  int64_t this_run = 0;  // segments this run wrote
  int64_t tokens = 0;    // target tokens this run generated
  int64_t failed = 0;    // segments that could not be translated, earlier runs included
  double seconds = 0;    // since this run started
};

// "1200/5000 segments (24.0%), 312.4 segments/s, 4521 tokens/s, ETA 12s"
std::string FormatProgress(const ProgressCounts& counts);
// "done: 5000 segments (3 failed) in 16.2 s, 308.6 segments/s, 4400 tokens/s"
std::string FormatSummary(const ProgressCounts& counts);
// 42s, 3m05s, 2h07m.
std::string FormatDuration(double seconds);

}  // namespace glossa::batch

#endif  // GLOSSA_SERVER_BATCH_PROGRESS_H_
