// gemv-paired: ops/gemv.h's kernel against oneDNN's matmul on one decoder step's matrices,
// alternating the two every few milliseconds in one process, so that this host's slow and fast
// spells (its speed moves by up to ~1.8x within minutes) hit both alike. Prints one JSON object:
// the median step time of each and the median of the per-round ratios oneDNN / kernel.
//   gemv-paired [--shape demo|base|big] [--part step|layers|proj] [--rows 32] [--rounds 20]
//   gemv-paired --matrix 256x1024 [--copies 1] ...: COPIES distinct matrices of that size instead
//   (one copy: its weights stay in L2 from round to round; 15 copies of 1 MB: each round reads
//   them from L3, as a decoder step does).
// Run with OMP_NUM_THREADS=1, as the engine runs one OpenMP thread per worker. The products run
// in a gemv::StreamingScope, as a decoder step's do; rows above gemv::kMaxRows run oneDNN in
// both arms (the ratio is then ~1). A tool, not a test.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "bench_util.h"
#include "nlohmann/json.hpp"
#include "ops/gemv.h"
#include "ops/linear.h"
#include "util/threads.h"

ABSL_FLAG(std::string, shape, "demo",
          "Decoder shape: demo (d_model 256, 3 layers, vocabulary 15315), base (512, 6, 58000) "
          "or big (1024, 6, 58000)");
ABSL_FLAG(std::string, part, "step",
          "step: every matrix of one decoder step; layers: the layers' matrices only; proj: the "
          "output projection only");
ABSL_FLAG(std::string, matrix, "",
          "INxOUT (e.g. 256x1024): --copies distinct matrices of this size instead of --shape and "
          "--part");
ABSL_FLAG(int, copies, 1, "With --matrix: how many distinct matrices, run one after another");
ABSL_FLAG(int, rows, 32, "Rows per product (batch x beams)");
ABSL_FLAG(int, threads, 1,
          "OpenMP threads of both arms (the engine runs one per worker; OpenMP's own default is "
          "every CPU, which made earlier figures two-thread ones on the 2-core machine)");
ABSL_FLAG(int, rounds, 20, "Timed rounds; each runs the kernel and oneDNN, in alternating order");

namespace {

struct Shape {
  int64_t d, layers, vocab;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "ops/gemv.h's kernel against oneDNN on one decoder step's matrices, alternating, one "
      "process; prints JSON.\n  gemv-paired [--shape demo|base|big] [--part step|layers|proj] "
      "[--rows 32] [--rounds 20]\n  gemv-paired --matrix INxOUT [--copies N] [--rows 32] "
      "[--rounds 20]");
  absl::ParseCommandLine(argc, argv);
  glossa::SetComputeThreads(absl::GetFlag(FLAGS_threads));
  const std::string shape_name = absl::GetFlag(FLAGS_shape), part = absl::GetFlag(FLAGS_part);
  const int rows = absl::GetFlag(FLAGS_rows), rounds = absl::GetFlag(FLAGS_rounds);
  Shape shape;
  if (shape_name == "demo") {
    shape = {256, 3, 15315};
  } else if (shape_name == "base") {
    shape = {512, 6, 58000};
  } else if (shape_name == "big") {
    shape = {1024, 6, 58000};
  } else {
    std::cerr << "gemv-paired: --shape must be demo, base or big\n";
    return 2;
  }
  if ((part != "step" && part != "layers" && part != "proj") || rows < 1 || rows > 4096 ||
      rounds < 1) {
    std::cerr << "gemv-paired: --part must be step, layers or proj; --rows 1..4096; --rounds >= 1\n";
    return 2;
  }
  std::vector<std::pair<int64_t, int64_t>> dims;
  const std::string matrix = absl::GetFlag(FLAGS_matrix);
  const int copies = absl::GetFlag(FLAGS_copies);
  if (!matrix.empty()) {
    long in = 0, out = 0;
    char x = 0, extra = 0;
    if (std::sscanf(matrix.c_str(), "%ld%c%ld%c", &in, &x, &out, &extra) != 3 || x != 'x' ||
        in < 1 || out < 1 || copies < 1 || copies > 1000 ||
        in * out * copies > (int64_t{1} << 28)) {
      std::cerr << "gemv-paired: --matrix must be INxOUT, --copies 1..1000, at most 2^28 "
                   "weights in all\n";
      return 2;
    }
    dims.assign(copies, {in, out});
    shape = {std::max<int64_t>(in, out), 0, out};  // sizes the input and output buffers
  } else if (part != "proj") {
    // Per layer: self-attention q, k, v, out and cross-attention q, out (d x d), then the FFN.
    for (int64_t l = 0; l < shape.layers; ++l) {
      for (int i = 0; i < 6; ++i) dims.push_back({shape.d, shape.d});
      dims.push_back({shape.d, 4 * shape.d});
      dims.push_back({4 * shape.d, shape.d});
    }
  }
  if (matrix.empty() && part != "layers") dims.push_back({shape.d, shape.vocab});

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-0.1f, 0.1f);
  std::vector<std::vector<float>> weights;
  std::vector<std::unique_ptr<glossa::Linear>> linears;
  double flop = 0.0;
  for (const auto& [in, out] : dims) {
    weights.emplace_back(in * out + out);
    for (float& f : weights.back()) f = uniform(rng);
    linears.push_back(std::make_unique<glossa::Linear>(weights.back().data(),
                                                       weights.back().data() + in * out, in, out));
    flop += 2.0 * rows * in * out;
  }
  std::vector<float> x(rows * 4 * shape.d), y(rows * std::max(shape.vocab, 4 * shape.d));
  for (float& f : x) f = uniform(rng);
  auto step_seconds = [&](bool kernel) {
    glossa::gemv::internal::SetEnabled(kernel);
    const glossa::gemv::StreamingScope streaming;  // as Decoder::Step
    const auto start = std::chrono::steady_clock::now();
    for (const auto& linear : linears) linear->Forward(x.data(), rows, y.data());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  step_seconds(true);  // warm-up: primitives made, the kernel's chunk probed
  step_seconds(false);
  std::vector<double> kernel, onednn, ratios;
  for (int r = 0; r < rounds; ++r) {
    const bool kernel_first = r % 2 == 0;
    const double a = step_seconds(kernel_first), b = step_seconds(!kernel_first);
    kernel.push_back(kernel_first ? a : b);
    onednn.push_back(kernel_first ? b : a);
    ratios.push_back(onednn.back() / kernel.back());
  }
  glossa::gemv::internal::SetEnabled(true);
  using glossa::bench::Round;
  const double k = Median(kernel), o = Median(onednn);
  const nlohmann::ordered_json report{
      {"shape", matrix.empty() ? shape_name : ""},
      {"part", matrix.empty() ? part : "matrix"},
      {"matrix", matrix},
      {"copies", matrix.empty() ? 0 : copies},
      {"rows", rows},
      {"threads", glossa::ComputeThreads()},
      {"rounds", rounds},
      {"kernel_ms", Round(k * 1e3, 3)},
      {"onednn_ms", Round(o * 1e3, 3)},
      {"kernel_gflops", Round(flop / k * 1e-9, 1)},
      {"onednn_gflops", Round(flop / o * 1e-9, 1)},
      {"onednn_over_kernel_median", Round(Median(ratios), 3)},
      {"fma_peak_gflops", Round(glossa::bench::MeasureFmaPeak() * 1e-9, 1)},
  };
  std::cout << report.dump() << std::endl;
  return 0;
}
