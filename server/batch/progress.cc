#include "server/batch/progress.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace glossa::batch {
namespace {

double Rate(int64_t count, double seconds) { return seconds > 0 ? count / seconds : 0.0; }

std::string Rates(const ProgressCounts& c) {
  return absl::StrFormat("%.1f segments/s, %.0f tokens/s", Rate(c.this_run, c.seconds),
                         Rate(c.tokens, c.seconds));
}

}  // namespace

std::string FormatDuration(double seconds) {
  const int64_t s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
}

std::string FormatProgress(const ProgressCounts& c) {
  const double percent = c.total > 0 ? 100.0 * c.done / c.total : 100.0;
  const double rate = Rate(c.this_run, c.seconds);
  const std::string eta = rate > 0 ? FormatDuration((c.total - c.done) / rate) : "?";
  std::string line = absl::StrFormat("%d/%d segments (%.1f%%), %s, ETA %s", c.done, c.total,
                                     percent, Rates(c), eta);
  if (c.failed > 0) absl::StrAppend(&line, ", ", c.failed, " failed");
  return line;
}

std::string FormatSummary(const ProgressCounts& c) {
  return absl::StrFormat("%d/%d segments (%d failed, %d this run) in %.1f s, %s", c.done, c.total,
                         c.failed, c.this_run, c.seconds, Rates(c));
}

}  // namespace glossa::batch
