// linear_bench: micro-benchmarks of the decoder's inner kernels (Google Benchmark).
//   linear_bench [--benchmark_filter=REGEX] [--benchmark_min_time=0.2]
// Run it with OMP_NUM_THREADS=1, as the engine runs one OpenMP thread per worker.
//
//   BM_Linear/in/out/rows            glossa::Linear::Forward (pre-packed weights, rows split into
//                                    pieces, see ops/linear.h)
//   BM_LinearInt8/in/out/rows/fast   the same with int8 (fast 0: two u8 codes per value) or
//                                    int8_fast (1), weights quantized at construction
//   BM_PlainMatmul/in/out/rows       the previous scheme, for comparison: one oneDNN matmul per row
//                                    count over the [out, in] weights used in place as an
//                                    {in, out}:ba view, fresh memory objects and an args map per
//                                    call
//   BM_AttendRow/heads/head_dim/keys glossa::AttendRow (vectorised kernels)
//   BM_AttendRowScalar/...           the previous scalar AttendRow, for comparison
//   BM_AttendSentence/len/sentence   a sentence's self-attention, 4 heads of 64 (the encoder's):
//                                    glossa::AttendSentence (1) or AttendRow per query (0)
// Shapes are those of the demo model (d_model 256, FFN 1024, vocabulary 15315, 4 heads of 64);
// BM_LinearBase: the OPUS-MT base shape's.
//   BM_SmallRows/rows/kernel          one decoder step's matrices of OPUS-MT base, twice over
//                                    (~410 MB, more than this machine's share of L3), at 1 to
//                                    128 rows, with ops/gemv.h's kernel on (1) or off (0:
//                                    oneDNN; also above gemv::kMaxRows rows; in a
//                                    gemv::StreamingScope, as a decoder step); counter GB/s of
//                                    weights streamed.
//   BM_ArgMaxScreen/rows/screen      OPUS-MT big's output projection, from DRAM, at 1 to 64 rows:
//                                    ops/argmax_screen.h's argmax (1; 2: its Linear's packing
//                                    deferred, candidates from the plain weights) against the
//                                    float32 product (0); counter GB/s of weights read.
//   BM_ArgMaxScreenBuild/deferred    building that screen from the packed or the plain weights.
//   BM_EmbedTokens/copy              32 embedding rows at random ids of a model file's
//                                    decoder.embed_tokens (GLOSSA_BENCH_MODEL, default the
//                                    demo model, run from the repository root), read in place
//                                    through the mapping (0) or with ModelFile::CopyOut (1, a pread
//                                    per row;
//                                    2: through an ops::RowCache of every row, as the model reads
//                                    them now, warm after the first iterations); counter rows/s.
//   BM_PeakRate/int8                 the core's peak (bench_util's MeasureFmaPeak, 0, GFLOP/s, or
//                                    MeasureVnniPeak, 1, GOP/s: 2 per u8·s8 product), 0.2 s each
//                                    iteration: the ceiling for BM_Linear (0), BM_LinearInt8 (1).
// Counters: GFLOP/s of the matmul, or of the 4·keys·d_model FLOP of attention.
// No figure is checked: this is a tool for comparing changes on one machine.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_util.h"
#include "layers/attention.h"
#include "layers/sentence_attention.h"
#include "model/model_file.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "ops/argmax_screen.h"
#include "ops/gemv.h"
#include "ops/linear.h"
#include "ops/ops.h"
#include "ops/row_cache.h"

namespace {

std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void SetCounters(benchmark::State& state, double flop_per_iteration) {
  state.counters["GFLOP/s"] = benchmark::Counter(flop_per_iteration * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Linear(benchmark::State& state) {
  const int64_t in = state.range(0), out = state.range(1), rows = state.range(2);
  const auto w = Random(in * out, 1, 0.1f), b = Random(out, 2), x = Random(rows * in, 3);
  std::vector<float> y(rows * out);
  glossa::Linear linear(w.data(), b.data(), in, out);
  linear.Forward(x.data(), rows, y.data());
  for (auto _ : state) {
    linear.Forward(x.data(), rows, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  SetCounters(state, 2.0 * rows * in * out);
  state.counters["packed"] = linear.packed();
}

// BM_LinearInt8/in/out/rows/fast: Linear::Forward with int8 (fast 0: two u8 codes per value) or
// int8_fast (1); counter GOP/s counts 2·rows·in·out (the two-code matmul does twice that).
void BM_LinearInt8(benchmark::State& state) {
  const int64_t in = state.range(0), out = state.range(1), rows = state.range(2);
  const auto compute =
      state.range(3) != 0 ? glossa::ComputeType::kInt8Fast : glossa::ComputeType::kInt8;
  const auto w = Random(in * out, 1, 0.1f), b = Random(out, 2), x = Random(rows * in, 3);
  std::vector<float> y(rows * out);
  glossa::Linear linear(glossa::LinearWeights{w.data()}, b.data(), in, out,
                        glossa::Activation::kNone, compute);
  linear.Forward(x.data(), rows, y.data());
  for (auto _ : state) {
    linear.Forward(x.data(), rows, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  SetCounters(state, 2.0 * rows * in * out);
}

// The core's peaks, measured by bench_util (as glossa-peer-run measures the FMA peak).
void BM_PeakRate(benchmark::State& state) {
  const bool int8 = state.range(0) != 0;
  double rate = 0.0;
  for (auto _ : state) {
    rate = int8 ? glossa::bench::MeasureVnniPeak(0.2) : glossa::bench::MeasureFmaPeak(0.2);
  }
  if (rate == 0.0) return state.SkipWithError("no AVX-512F / AVX512-VNNI on this CPU");
  state.counters["GFLOP/s"] = rate * 1e-9;
}
BENCHMARK(BM_PeakRate)->Arg(0)->Arg(1)->ArgName("int8")->Iterations(3);

// The scheme Linear used before weights were pre-packed.
class PlainMatmul {
 public:
  PlainMatmul(const float* w, const float* b, int64_t in, int64_t out) : in_(in), out_(out) {
    using dnnl::memory;
    weight_ = memory({{in, out}, memory::data_type::f32, memory::format_tag::ba},
                     glossa::CpuEngine(), const_cast<float*>(w));
    bias_ = memory({{1, out}, memory::data_type::f32, memory::format_tag::ab}, glossa::CpuEngine(),
                   const_cast<float*>(b));
  }
  void Forward(const float* x, int64_t rows, float* y) {
    using dnnl::memory;
    const memory::desc src({rows, in_}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc dst({rows, out_}, memory::data_type::f32, memory::format_tag::ab);
    auto it = prims_.find(rows);
    if (it == prims_.end()) {
      dnnl::matmul::primitive_desc pd(
          dnnl::matmul::desc(src, weight_.get_desc(), bias_.get_desc(), dst), glossa::CpuEngine());
      it = prims_.emplace(rows, dnnl::matmul(pd)).first;
    }
    memory s(src, glossa::CpuEngine(), const_cast<float*>(x)), d(dst, glossa::CpuEngine(), y);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, s},
                                            {DNNL_ARG_WEIGHTS, weight_},
                                            {DNNL_ARG_BIAS, bias_},
                                            {DNNL_ARG_DST, d}};
    it->second.execute(glossa::ThreadStream(), args);
    glossa::ThreadStream().wait();
  }

 private:
  int64_t in_, out_;
  dnnl::memory weight_, bias_;
  std::map<int64_t, dnnl::matmul> prims_;
};

void BM_PlainMatmul(benchmark::State& state) {
  const int64_t in = state.range(0), out = state.range(1), rows = state.range(2);
  const auto w = Random(in * out, 1, 0.1f), b = Random(out, 2), x = Random(rows * in, 3);
  std::vector<float> y(rows * out);
  PlainMatmul matmul(w.data(), b.data(), in, out);
  matmul.Forward(x.data(), rows, y.data());
  for (auto _ : state) {
    matmul.Forward(x.data(), rows, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  SetCounters(state, 2.0 * rows * in * out);
}

void LinearShapes(benchmark::internal::Benchmark* b) {
  for (auto [in, out] : std::vector<std::pair<int64_t, int64_t>>{
           {256, 256}, {256, 1024}, {1024, 256}, {256, 15315}}) {
    for (int64_t rows : {1, 2, 4, 8, 16, 32, 33, 48, 64, 65, 96, 128, 256}) {
      b->Args({in, out, rows});
    }
  }
}

// The OPUS-MT base shape's matrices (d_model 512, FFN 2048, vocabulary 58,101) at the row counts
// of greedy and beam-4 decoding of one batch of 32 (and of one sentence).
void BaseShapes(benchmark::internal::Benchmark* b) {
  for (auto [in, out] : std::vector<std::pair<int64_t, int64_t>>{
           {512, 512}, {512, 2048}, {2048, 512}, {512, 58101}}) {
    for (int64_t rows : {1, 32, 128}) b->Args({in, out, rows});
  }
}

BENCHMARK(BM_Linear)->Apply(LinearShapes)->ArgNames({"in", "out", "rows"});
BENCHMARK(BM_Linear)->Name("BM_LinearBase")->Apply(BaseShapes)->ArgNames({"in", "out", "rows"});
BENCHMARK(BM_LinearInt8)
    ->ArgsProduct({{256}, {256, 768, 1024, 15315}, {1, 32, 128}, {0, 1}})
    ->ArgsProduct({{1024}, {256}, {1, 32, 128}, {0, 1}})
    ->ArgNames({"in", "out", "rows", "fast"});
BENCHMARK(BM_PlainMatmul)->Apply(LinearShapes)->ArgNames({"in", "out", "rows"});

// A decoder step of OPUS-MT base at batch 1 streams every decoder matrix and the output
// projection once: the weights come from DRAM, not cache, so the set is made larger than L3.
void BM_SmallRows(benchmark::State& state) {
  const int64_t rows = state.range(0);
  glossa::gemv::internal::SetEnabled(state.range(1) != 0);
  const glossa::gemv::StreamingScope streaming;  // as Decoder::Step
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int copy = 0; copy < 2; ++copy) {
    for (int layer = 0; layer < 6; ++layer) {
      for (int i = 0; i < 6; ++i) shapes.emplace_back(512, 512);  // self q k v o, cross q o
      shapes.emplace_back(512, 2048);
      shapes.emplace_back(2048, 512);
    }
    shapes.emplace_back(512, 58101);
  }
  std::vector<std::vector<float>> weights;
  std::vector<std::unique_ptr<glossa::Linear>> linears;
  double bytes = 0;
  for (auto [in, out] : shapes) {
    weights.push_back(Random(in * out, static_cast<uint32_t>(weights.size()), 0.1f));
    linears.push_back(std::make_unique<glossa::Linear>(weights.back().data(), nullptr, in, out));
    bytes += 4.0 * in * out;
  }
  const auto x = Random(rows * 2048, 7);
  std::vector<float> y(rows * 58101);
  for (auto& linear : linears) linear->Forward(x.data(), rows, y.data());
  for (auto _ : state) {
    for (auto& linear : linears) linear->Forward(x.data(), rows, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  glossa::gemv::internal::SetEnabled(true);
}
BENCHMARK(BM_SmallRows)
    ->ArgsProduct({{1, 2, 3, 4, 8, 16, 32, 64, 128}, {1, 0}})
    ->ArgNames({"rows", "kernel"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The output projection of OPUS-MT big (1024 x 60,878, two copies so that each pass streams from
// DRAM) for `rows` rows: its argmax through ops/argmax_screen.h (screen 1), or the float32
// product the step computes otherwise (screen 0: Forward, ops/gemv.h's kernel). Counter GB/s: of
// the bytes each reads (int8 or float32 weights).
void BM_ArgMaxScreen(benchmark::State& state) {
  const int64_t rows = state.range(0), in = 1024, out = 60878;
  const bool screened = state.range(1) != 0, deferred = state.range(1) == 2;
  const glossa::gemv::StreamingScope streaming;
  std::vector<std::vector<float>> weights;
  std::vector<std::unique_ptr<glossa::Linear>> linears;
  std::vector<std::unique_ptr<glossa::ArgMaxScreen>> screens;
  const auto bias = Random(out, 9, 0.1f);
  for (uint32_t copy = 0; copy < 2; ++copy) {
    weights.push_back(Random(in * out, 20 + copy, 0.1f));
    linears.push_back(std::make_unique<glossa::Linear>(
        glossa::LinearWeights{weights.back().data()}, bias.data(), in, out,
        glossa::Activation::kNone, glossa::ComputeType::kFloat32, glossa::Linear::PackedSliceDone(),
        deferred ? glossa::Linear::Packing::kDeferred : glossa::Linear::Packing::kNow));
    if (screened) {
      screens.push_back(glossa::ArgMaxScreen::Build(*linears.back()));
      if (screens.back() == nullptr) return state.SkipWithError("no ArgMaxScreen on this CPU");
    }
  }
  const auto x = Random(rows * in, 7, 3.0f);
  std::vector<float> y(rows * out);
  std::vector<int> offsets(rows + 1, 0);
  int64_t index[glossa::ArgMaxScreen::kMaxRows];
  float value[glossa::ArgMaxScreen::kMaxRows];
  int64_t undecided = 0;
  const glossa::ArgMaxScreen::Counts before = glossa::ArgMaxScreen::ProcessCounts();
  for (auto _ : state) {
    for (size_t c = 0; c < linears.size(); ++c) {
      if (screened) {
        undecided += !screens[c]->ArgMax(x.data(), rows, nullptr, offsets.data(), index, value);
      } else {
        linears[c]->Forward(x.data(), rows, y.data());
      }
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::DoNotOptimize(index);
  }
  if (undecided > 0) state.SkipWithError("the screen could not decide");
  const glossa::ArgMaxScreen::Counts after = glossa::ArgMaxScreen::ProcessCounts();
  if (screened) {
    state.counters["candidates/row"] = static_cast<double>(after.candidates - before.candidates) /
                                       std::max<int64_t>(1, after.rows - before.rows);
  }
  state.counters["GB/s"] = benchmark::Counter(2.0 * in * out * (screened ? 1 : 4) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ArgMaxScreen)
    ->ArgsProduct({{1, 4, 8, 32, 64}, {1, 2, 0}})
    ->ArgNames({"rows", "screen"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Building the screen of OPUS-MT big's output projection from the packed copy (deferred 0) and
// from the plain weights slab by slab (1: Linear::Packing::kDeferred, as the model's projection
// with a screen); the weights are in memory (a model's come from its mapped file, page faults
// on top).
void BM_ArgMaxScreenBuild(benchmark::State& state) {
  const int64_t in = 1024, out = 60878;
  const auto w = Random(in * out, 20, 0.1f), bias = Random(out, 9, 0.1f);
  const glossa::Linear linear(
      glossa::LinearWeights{w.data()}, bias.data(), in, out, glossa::Activation::kNone,
      glossa::ComputeType::kFloat32, glossa::Linear::PackedSliceDone(),
      state.range(0) != 0 ? glossa::Linear::Packing::kDeferred : glossa::Linear::Packing::kNow);
  for (auto _ : state) {
    auto screen = glossa::ArgMaxScreen::Build(linear);
    if (screen == nullptr) return state.SkipWithError("no ArgMaxScreen on this CPU");
    benchmark::DoNotOptimize(screen.get());
  }
}
BENCHMARK(BM_ArgMaxScreenBuild)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("deferred")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Embedding rows read in place or through a pread of the model file (see the header).
void BM_EmbedTokens(benchmark::State& state) {
  const char* env = std::getenv("GLOSSA_BENCH_MODEL");
  auto file = glossa::ModelFile::Open(env != nullptr ? env : "models/opus-mt-es-en-bible.glossa",
                                      /*verify_checksums=*/false);
  if (!file.ok()) return state.SkipWithError(std::string(file.status().message()).c_str());
  auto table = (*file)->Tensor("decoder.embed_tokens.weight");
  if (!table.ok()) return state.SkipWithError(std::string(table.status().message()).c_str());
  const int64_t vocab = (*table)->shape[0], dim = (*table)->shape[1], rows = 32;
  glossa::ops::StoredTable stored{(*table)->f32(), {}, nullptr};
  if (state.range(0) != 0) {
    stored.copy = [&f = **file](const void* from, uint64_t bytes, void* to) {
      f.CopyOut(from, bytes, to);
    };
  }
  if (state.range(0) == 2) {  // every row kept after its first read, as the model does
    stored.cache = std::make_shared<glossa::ops::RowCache>(stored.rows, vocab, dim, stored.copy,
                                                           vocab);
  }
  const std::vector<float> positions(rows * dim, 0.5f);
  std::vector<int> pos(rows), ids(rows);
  for (int r = 0; r < rows; ++r) pos[r] = r;
  std::vector<float> out(rows * dim);
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> pick(0, static_cast<int>(vocab) - 1);
  for (auto _ : state) {
    for (int& id : ids) id = pick(rng);
    glossa::ops::EmbedTokens(stored, positions.data(), ids.data(), pos.data(), rows, dim, 16.0f,
                             out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(rows), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_EmbedTokens)->Arg(0)->Arg(1)->Arg(2)->ArgName("copy")->UseRealTime();

// The AttendRow of before the vectorised kernels, kept verbatim for comparison.
template <typename KeyRow, typename ValueRow>
void AttendRowScalar(const float* q, int heads, int head_dim, int num_keys, KeyRow key_row,
                     ValueRow value_row, float* scores, float* out) {
  for (int h = 0; h < heads; ++h) {
    const int64_t off = static_cast<int64_t>(h) * head_dim;
    const float* qh = q + off;
    for (int t = 0; t < num_keys; ++t) {
      const float* k = key_row(t) + off;
      float dot = 0.0f;
      for (int i = 0; i < head_dim; ++i) dot += qh[i] * k[i];
      scores[t] = dot;
    }
    glossa::ops::Softmax(scores, num_keys);
    float* oh = out + off;
    for (int i = 0; i < head_dim; ++i) oh[i] = 0.0f;
    for (int t = 0; t < num_keys; ++t) {
      const float* v = value_row(t) + off;
      const float p = scores[t];
      for (int i = 0; i < head_dim; ++i) oh[i] += p * v[i];
    }
  }
}

template <bool kScalar>
void BM_Attend(benchmark::State& state) {
  const int heads = static_cast<int>(state.range(0)), head_dim = static_cast<int>(state.range(1));
  const int keys = static_cast<int>(state.range(2));
  const int64_t d = int64_t{heads} * head_dim;
  const auto q = Random(d, 1, 0.2f), k = Random(keys * d, 2), v = Random(keys * d, 3);
  std::vector<float> scores(int64_t{heads} * keys), out(d);
  auto key_row = [&](int t) { return k.data() + t * d; };
  auto value_row = [&](int t) { return v.data() + t * d; };
  if (!kScalar) {  // sanity check against the scalar version (not a test: those live in tests/)
    std::vector<float> expected(d);
    AttendRowScalar(q.data(), heads, head_dim, keys, key_row, value_row, scores.data(),
                    expected.data());
    glossa::AttendRow(q.data(), heads, head_dim, keys, key_row, value_row, scores.data(),
                      out.data());
    for (int64_t i = 0; i < d; ++i) {
      if (std::abs(out[i] - expected[i]) > 1e-5f * (1.0f + std::abs(expected[i]))) {
        state.SkipWithError("AttendRow differs from the scalar version");
        return;
      }
    }
  }
  for (auto _ : state) {
    if (kScalar) {
      AttendRowScalar(q.data(), heads, head_dim, keys, key_row, value_row, scores.data(),
                      out.data());
    } else {
      glossa::AttendRow(q.data(), heads, head_dim, keys, key_row, value_row, scores.data(),
                        out.data());
    }
    benchmark::DoNotOptimize(out.data());
  }
  SetCounters(state, 4.0 * keys * d);
}

void AttentionShapes(benchmark::internal::Benchmark* b) {
  for (int keys : {1, 8, 32, 64, 128}) b->Args({4, 64, keys});
  b->Args({8, 64, 32});
  b->Args({4, 30, 32});  // head_dim not a multiple of 16
}

// A whole sentence's self-attention (the encoder's): AttendSentence (1) or AttendRow per query (0).
void BM_AttendSentence(benchmark::State& state) {
  const int len = static_cast<int>(state.range(0)), sentence = static_cast<int>(state.range(1));
  constexpr int kHeads = 4, kHeadDim = 64, d = kHeads * kHeadDim;
  const auto q = Random(len * d, 1, 0.2f), k = Random(len * d, 2), v = Random(len * d, 3);
  std::vector<float> scratch, out(len * d);
  for (auto _ : state) {
    if (sentence) {
      glossa::AttendSentence(q.data(), k.data(), v.data(), len, kHeads, kHeadDim, d, scratch,
                             out.data());
    } else {
      scratch.resize(kHeads * len);
      for (int t = 0; t < len; ++t) {
        glossa::AttendRow(
            q.data() + t * d, kHeads, kHeadDim, len, [&](int j) { return k.data() + j * d; },
            [&](int j) { return v.data() + j * d; }, scratch.data(), out.data() + t * d);
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  SetCounters(state, 4.0 * len * len * d);
}
BENCHMARK(BM_AttendSentence)
    ->ArgsProduct({{8, 30, 64, 128}, {0, 1}})
    ->ArgNames({"len", "sentence"});

BENCHMARK_TEMPLATE(BM_Attend, false)
    ->Name("BM_AttendRow")
    ->Apply(AttentionShapes)
    ->ArgNames({"heads", "head_dim", "keys"});
BENCHMARK_TEMPLATE(BM_Attend, true)
    ->Name("BM_AttendRowScalar")
    ->Apply(AttentionShapes)
    ->ArgNames({"heads", "head_dim", "keys"});

}  // namespace

BENCHMARK_MAIN();
