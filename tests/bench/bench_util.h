// What glossa-bench shares: reading inputs, parsing flag lists, statistics and /proc.
#ifndef GLOSSA_TESTS_BENCH_BENCH_UTIL_H_
#define GLOSSA_TESTS_BENCH_BENCH_UTIL_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace glossa::bench {

// The first `limit` lines of `path` (all when limit <= 0), trailing '\r' removed.
absl::StatusOr<std::vector<std::string>> ReadLines(const std::string& path, int limit);

// "1,4" -> {1, 4}; INVALID_ARGUMENT naming the flag for anything but positive integers.
absl::StatusOr<std::vector<int>> ParseIntList(const std::string& flag, const std::string& text);

// The p-th percentile (0..100) of `values`, linearly interpolated between closest ranks
// (numpy's default); 0 for an empty list.
double Percentile(std::vector<double> values, double p);

// A "Vm*" field of /proc/self/status (e.g. "VmHWM", "VmRSS") in MiB; -1 when unreadable.
double ProcStatusMb(const std::string& key);

// `value` rounded to `decimals` places after the point (for readable JSON).
double Round(double value, int decimals);

// The 1-minute load average from /proc/loadavg; -1 when unreadable.
double LoadAverage();

// "model name" of the first CPU in /proc/cpuinfo, or "unknown".
std::string CpuModel();

// This core's float32 FMA peak in FLOP/s, measured now: `seconds` of independent AVX-512 (or
// AVX2) multiply-add chains on the calling thread, registers only, so the figure reflects the
// core's vector units and its clock at the time (which moves on a shared host). The GEMM
// roofline shares of glossa-bench and peer_compare.py divide by it. 0 without AVX2+FMA.
double MeasureFmaPeak(double seconds = 0.3);
// The same for int8: u8·s8 products (2 operations each) per second in chains of AVX512-VNNI
// vpdpbusd, the ceiling of the int8 matmuls (4 × the FMA peak where both run at full width). 0
// without AVX512-VNNI.
double MeasureVnniPeak(double seconds = 0.3);

// How fast this process reads memory now, from a fresh `mib` MiB anonymous mapping (well past
// the last-level cache): `read_gbps`, one core reading it in order (the hardware prefetchers'
// case); `chase_ns`, the time per load of a chain through its cache lines in random order (each
// load waits for the one before, so it is DRAM latency plus a page walk for most loads). On the
// 2-core VM, Glossa's float32 speed moves by up to 2x between processes and half hours while the
// FMA peak does not; these figures tell whether the memory moved with it. The mapping is gone on
// return, and the process's peak RSS (VmHWM) is reset to its RSS then, so that a later peak
// RSS reading does not include it. Zeros when the mapping fails.
struct MemoryProbe {
  double read_gbps = 0.0;
  double chase_ns = 0.0;
};
MemoryProbe MeasureMemory(int mib = 128);

// GB/s of reading [data, data + bytes) in order on this thread, the faster of two passes (from
// DRAM for data well past the last-level cache). glossa-peer-run reads the model's packed output
// projection with it just before the timed run: packed weights, as Glossa's products read them
// (slow runs stall on loads of packed weights inside oneDNN's kernels).
double MeasureReadGbps(const void* data, size_t bytes);

}  // namespace glossa::bench

#endif  // GLOSSA_TESTS_BENCH_BENCH_UTIL_H_
