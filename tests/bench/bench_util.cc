#include "bench_util.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <numeric>
#include <random>
#include <vector>

#include <sys/mman.h>

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
// Operations per second of kChains independent chains acc = STEP(acc, a, b) of one vector
// instruction (chain i starting from INIT, an expression of i), each counting OPS operations,
// repeated for `seconds` (16 chains: 12 measured ~10% lower on this machine). The result goes
// to a volatile, so the loop stays.
constexpr int kChains = 16;
#define GLOSSA_CHAIN_RATE(VEC, OPS, INIT, A, B, STEP, FIRST)                          \
  VEC acc[kChains];                                                                  \
  for (int i = 0; i < kChains; ++i) acc[i] = INIT;                                   \
  const VEC a = A, b = B;                                                            \
  const auto start = std::chrono::steady_clock::now();                               \
  int64_t steps = 0;                                                                 \
  double elapsed = 0.0;                                                              \
  do {                                                                               \
    for (int s = 0; s < 256; ++s) {                                                  \
      for (int i = 0; i < kChains; ++i) acc[i] = STEP(acc[i], a, b);                 \
    }                                                                                \
    steps += 256;                                                                    \
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start) \
                  .count();                                                          \
  } while (elapsed < seconds);                                                       \
  float sum = 0.0f;                                                                  \
  for (int i = 0; i < kChains; ++i) sum += FIRST(acc[i]);                            \
  volatile float sink = sum;                                                         \
  (void)sink;                                                                        \
  return static_cast<double>(OPS) * kChains * static_cast<double>(steps) / elapsed;

#define GLOSSA_FMA_INIT(SET1) SET1(1.0f + 1e-7f * static_cast<float>(i))
__attribute__((target("avx512f"))) double FmaRateAvx512(double seconds) {
  GLOSSA_CHAIN_RATE(__m512, 2 * 16, GLOSSA_FMA_INIT(_mm512_set1_ps), _mm512_set1_ps(0.999999f),
                    _mm512_set1_ps(1e-7f), _mm512_fmadd_ps, _mm512_cvtss_f32)
}
__attribute__((target("avx2,fma"))) double FmaRateAvx2(double seconds) {
  GLOSSA_CHAIN_RATE(__m256, 2 * 8, GLOSSA_FMA_INIT(_mm256_set1_ps), _mm256_set1_ps(0.999999f),
                    _mm256_set1_ps(1e-7f), _mm256_fmadd_ps, _mm256_cvtss_f32)
}
#undef GLOSSA_FMA_INIT
__attribute__((target("avx512f"))) inline int FirstLane(__m512i v) {
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, v);
  return lanes[0];
}
// vpdpbusd: 64 u8·s8 products per instruction, 2 operations each.
__attribute__((target("avx512f,avx512vnni"))) double VnniRateAvx512(double seconds) {
  GLOSSA_CHAIN_RATE(__m512i, 2 * 64, _mm512_set1_epi32(i), _mm512_set1_epi32(0x01020304),
                    _mm512_set1_epi32(0x01010101), _mm512_dpbusd_epi32, FirstLane)
}
#undef GLOSSA_CHAIN_RATE
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

double MeasureVnniPeak(double seconds) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni")) {
    return VnniRateAvx512(seconds);
  }
#endif
  (void)seconds;
  return 0.0;
}

namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// GB/s of one in-order read of words[0, n), the faster of two passes.
double ReadRate(const uint64_t* words, size_t n) {
  double best = 0.0;
  for (int pass = 0; pass < 2; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 4 <= n; i += 4) {
      a += words[i], b += words[i + 1], c += words[i + 2], d += words[i + 3];
    }
    const double seconds = SecondsSince(start);
    volatile uint64_t sink = a + b + c + d;
    (void)sink;
    if (seconds > 0) best = std::max(best, static_cast<double>(n * 8) / seconds * 1e-9);
  }
  return best;
}

// ns per load of a chain that visits the cache lines of `words` (n words, 8 per line) in random
// order: each line's first word holds the index of the next line.
double ChaseLatency(uint64_t* words, size_t n) {
  const size_t lines = n / 8;
  std::vector<uint32_t> order(lines);
  std::iota(order.begin(), order.end(), 0u);
  std::mt19937_64 rng(7);
  for (size_t i = lines - 1; i > 0; --i) {  // Sattolo: one cycle through every line
    std::swap(order[i], order[std::uniform_int_distribution<size_t>(0, i - 1)(rng)]);
  }
  for (size_t i = 0; i < lines; ++i) words[size_t{order[i]} * 8] = order[(i + 1) % lines];
  const size_t hops = std::min<size_t>(lines, size_t{1} << 20);
  uint64_t at = order[0];
  const auto start = std::chrono::steady_clock::now();
  for (size_t h = 0; h < hops; ++h) at = words[at * 8];
  const double seconds = SecondsSince(start);
  volatile uint64_t sink = at;
  (void)sink;
  return seconds / static_cast<double>(hops) * 1e9;
}

}  // namespace

double MeasureReadGbps(const void* data, size_t bytes) {
  return ReadRate(static_cast<const uint64_t*>(data), bytes / sizeof(uint64_t));
}

MemoryProbe MeasureMemory(int mib) {
  const size_t bytes = static_cast<size_t>(mib) << 20;
  void* mapped =
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return {};
  auto* words = static_cast<uint64_t*>(mapped);
  const size_t n = bytes / sizeof(uint64_t);
  std::iota(words, words + n, uint64_t{0});
  MemoryProbe probe;
  probe.read_gbps = ReadRate(words, n);
  probe.chase_ns = ChaseLatency(words, n);
  munmap(mapped, bytes);
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM = VmRSS (Linux 4.0+)
  return probe;
}

}  // namespace glossa::bench
