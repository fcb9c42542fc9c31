#include "bench_util.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace glossa::bench {

absl::StatusOr<std::vector<std::string>> ReadLines(const std::string& path, int limit) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read --input '", path, "'"));
  std::vector<std::string> lines;
  std::string line;
  while ((limit <= 0 || static_cast<int>(lines.size()) < limit) && std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  if (lines.empty())
    return absl::InvalidArgumentError(absl::StrCat("--input '", path, "' is empty"));
  return lines;
}

absl::StatusOr<std::vector<int>> ParseIntList(const std::string& flag, const std::string& text) {
  std::vector<int> values;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int value = 0;
    if (!absl::SimpleAtoi(part, &value) || value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", part, "' is not a positive integer (want e.g. 1,4)"));
    }
    values.push_back(value);
  }
  if (values.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  return values;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (rank - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

double ProcStatusMb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = key + ":";
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, prefix)) continue;
    rest = absl::StripAsciiWhitespace(absl::StripSuffix(absl::StripAsciiWhitespace(rest), "kB"));
    int64_t kb = 0;
    return absl::SimpleAtoi(rest, &kb) ? static_cast<double>(kb) / 1024.0 : -1.0;
  }
  return -1.0;
}

double Round(double value, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(value * scale) / scale;
}

double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double load = -1.0;
  in >> load;
  return in ? load : -1.0;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "model name")) continue;
    const size_t colon = rest.find(':');
    if (colon != absl::string_view::npos) {
      return std::string(absl::StripAsciiWhitespace(rest.substr(colon + 1)));
    }
  }
  return "unknown";
}

namespace {

#if defined(__x86_64__) && defined(__GNUC__)
// FLOP/s of kChains independent multiply-add chains of LANES-wide vectors, repeated for
// `seconds` (16 chains: 12 measured ~10% lower on this machine). The result goes to a
// volatile, so the loop stays.
constexpr int kChains = 16;
#define GLOSSA_FMA_RATE(VEC, LANES, SET1, FMA, FIRST)                                     \
  VEC acc[kChains];                                                                      \
  for (int i = 0; i < kChains; ++i) acc[i] = SET1(1.0f + 1e-7f * static_cast<float>(i)); \
  const VEC a = SET1(0.999999f), b = SET1(1e-7f);                                        \
  const auto start = std::chrono::steady_clock::now();                                   \
  int64_t steps = 0;                                                                     \
  double elapsed = 0.0;                                                                  \
  do {                                                                                   \
    for (int s = 0; s < 256; ++s) {                                                      \
      for (int i = 0; i < kChains; ++i) acc[i] = FMA(acc[i], a, b);                      \
    }                                                                                    \
    steps += 256;                                                                        \
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start)    \
                  .count();                                                              \
  } while (elapsed < seconds);                                                           \
  float sum = 0.0f;                                                                      \
  for (int i = 0; i < kChains; ++i) sum += FIRST(acc[i]);                                \
  volatile float sink = sum;                                                             \
  (void)sink;                                                                            \
  return 2.0 * LANES * kChains * static_cast<double>(steps) / elapsed;

__attribute__((target("avx512f"))) double FmaRateAvx512(double seconds) {
  GLOSSA_FMA_RATE(__m512, 16, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_cvtss_f32)
}
__attribute__((target("avx2,fma"))) double FmaRateAvx2(double seconds) {
  GLOSSA_FMA_RATE(__m256, 8, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_cvtss_f32)
}
#undef GLOSSA_FMA_RATE
#endif

}  // namespace

double MeasureFmaPeak(double seconds) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return FmaRateAvx512(seconds);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return FmaRateAvx2(seconds);
  }
#endif
  (void)seconds;
  return 0.0;
}

}  // namespace glossa::bench
