// The decode hot path allocates nothing once warm: global operator new/delete are
// replaced by counting versions, and the engine (workers = 0, driven by RunOnce) runs a mixed
// workload (greedy, beam 4 and sampling sentences side by side) twice: the first run warms every
// buffer, oneDNN primitive and KV pool block up, the second counts the allocations of each
// iteration of the step loop.
//
// An iteration that admits sentences (encoder batch, Search and KV cache per sentence, shared
// encoder output) or retires them (n-best lists, the job's results and on_done) allocates by
// design; every other iteration, a decoder step for every active row plus search, must allocate
// nothing in Glossa's code.
//
// oneDNN is counted apart: dnnl_primitive_execute() itself allocates a few small blocks per call
// (its argument map and execution context; about 7.5 per matmul, 187 per decoder step of this
// model) and no public oneDNN 2.6 API executes a primitive without them. Allocations with a
// libdnnl frame on their stack are reported, not failed. Not counted at all: malloc and
// aligned_alloc called directly (KvBlockPool's blocks, which go back to the pool, oneDNN's own
// buffers).
//
// With GLOSSA_ALLOC_TRACE=1 in the environment, every counted allocation of the measured run
// outside oneDNN prints a backtrace (addresses: resolve them with addr2line -f -C -e alloc_test).
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "common/test_util.h"
#include "engine/engine.h"
#include "oneapi/dnnl/dnnl.h"

namespace {

std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};         // outside oneDNN
std::atomic<int64_t> g_onednn_allocations{0};  // with a libdnnl frame on the stack
bool g_trace = false;
thread_local bool t_in_count = false;

// The address range of libdnnl's loaded segments.
uintptr_t g_dnnl_begin = 0, g_dnnl_end = 0;

void FindOneDnn() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&dnnl_primitive_execute), &info) == 0) return;
  struct Range {
    uintptr_t base, begin, end;
  } range{reinterpret_cast<uintptr_t>(info.dli_fbase), UINTPTR_MAX, 0};
  dl_iterate_phdr(
      [](dl_phdr_info* object, size_t, void* data) {
        Range* r = static_cast<Range*>(data);
        bool match = false;
        for (int i = 0; i < object->dlpi_phnum; ++i) {
          const uintptr_t start = object->dlpi_addr + object->dlpi_phdr[i].p_vaddr;
          if (object->dlpi_phdr[i].p_type == PT_LOAD && start <= r->base &&
              r->base < start + object->dlpi_phdr[i].p_memsz + 0x1000) {
            match = true;
          }
        }
        if (!match) return 0;
        for (int i = 0; i < object->dlpi_phnum; ++i) {
          if (object->dlpi_phdr[i].p_type != PT_LOAD) continue;
          const uintptr_t start = object->dlpi_addr + object->dlpi_phdr[i].p_vaddr;
          r->begin = std::min(r->begin, start);
          r->end = std::max(r->end, start + object->dlpi_phdr[i].p_memsz);
        }
        return 1;
      },
      &range);
  g_dnnl_begin = range.begin;
  g_dnnl_end = range.end;
}

void Count() {
  if (!g_counting.load(std::memory_order_relaxed) || t_in_count) return;
  t_in_count = true;  // backtrace() must not count itself
  void* frames[64];
  const int n = backtrace(frames, 64);
  bool onednn = false;
  for (int i = 0; i < n && !onednn; ++i) {
    const auto a = reinterpret_cast<uintptr_t>(frames[i]);
    onednn = a >= g_dnnl_begin && a < g_dnnl_end;
  }
  if (onednn) {
    g_onednn_allocations.fetch_add(1, std::memory_order_relaxed);
  } else {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (g_trace) {
      static const char kHeader[] = "--- allocation during a counted engine iteration:\n";
      (void)!write(2, kHeader, sizeof(kHeader) - 1);
      backtrace_symbols_fd(frames, n, 2);
    }
  }
  t_in_count = false;
}

void* Allocate(std::size_t size) {
  Count();
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void* AllocateAligned(std::size_t size, std::align_val_t align) {
  Count();
  const std::size_t a = static_cast<std::size_t>(align);
  void* p = std::aligned_alloc(a, (size + a - 1) / a * a);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t size) { return Allocate(size); }
void* operator new[](std::size_t size) { return Allocate(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return Allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return Allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t size, std::align_val_t align) {
  return AllocateAligned(size, align);
}
void* operator new[](std::size_t size, std::align_val_t align) {
  return AllocateAligned(size, align);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace glossa {
namespace {

struct Iteration {
  int64_t allocations = 0;  // outside oneDNN
  int64_t onednn_allocations = 0;
  bool admitted = false;  // sentences left the queue
  bool retired = false;   // sentences finished
  int64_t rows = 0;       // decoder rows of the step
};

struct Outcome {
  int done = 0;
  bool all_ok = true;
};

struct Workload {
  std::vector<std::shared_ptr<Job>> jobs;
  std::shared_ptr<Outcome> outcome = std::make_shared<Outcome>();
};

std::vector<std::vector<int>> Sources(const std::vector<testing::GoldenLine>& golden,
                                      std::vector<size_t> lines) {
  std::vector<std::vector<int>> s;
  for (size_t i : lines) s.push_back(golden[i].src_ids);
  return s;
}

std::shared_ptr<Job> MakeJob(const std::vector<std::vector<int>>& sources, int beam,
                             float temperature, int max_new_tokens, Workload& w) {
  auto job = std::make_shared<Job>();
  job->sources = sources;
  job->search.beam_size = beam;
  job->search.num_hypotheses = beam;
  job->search.max_new_tokens = max_new_tokens;
  job->search.sampling.temperature = temperature;
  job->search.sampling.top_k = temperature > 0 ? 20 : 0;
  job->search.sampling.seed = 7;
  job->on_done = [outcome = w.outcome](JobResult r) {
    ++outcome->done;
    outcome->all_ok = outcome->all_ok && r.ok();
  };
  w.jobs.push_back(job);
  return job;
}

// Every decoding control at once: repetition penalty, no-repeat n-grams, a minimum length, a
// target prefix and per-token scores.
void WithEveryControl(Job& job) {
  job.search.repetition_penalty = 1.3f;
  job.search.no_repeat_ngram_size = 3;
  job.search.min_new_tokens = 5;
  job.search.prefix = {72, 104, 8};  // "The man and"
  job.search.token_scores = true;
}

constexpr int kJobs = 7;
constexpr size_t kLateJobIteration = 10;

// Greedy (the two longest outputs of the dev set among them), beam 4 and sampling sentences side
// by side, each also with every decoding control; after kLateJobIteration iterations, beam-4
// sentences limited to 16 tokens (forced EOS) join them.
Workload MakeWorkload(const std::vector<testing::GoldenLine>& golden) {
  Workload w;
  MakeJob(Sources(golden, {415, 210, 0, 1, 2, 3}), 1, 0.0f, 128, w);
  MakeJob(Sources(golden, {10, 11, 12, 13}), 4, 0.0f, 128, w);
  MakeJob(Sources(golden, {20, 21}), 1, 1.0f, 128, w);
  WithEveryControl(*MakeJob(Sources(golden, {40, 41}), 1, 0.0f, 128, w));
  WithEveryControl(*MakeJob(Sources(golden, {50, 51}), 4, 0.0f, 128, w));
  WithEveryControl(*MakeJob(Sources(golden, {60}), 1, 1.0f, 128, w));
  MakeJob(Sources(golden, {30, 31}), 4, 0.0f, 16, w);
  return w;
}

// Runs the workload to the end; one entry per iteration of the step loop.
std::vector<Iteration> Drive(Engine& engine, Workload& w, bool trace) {
  g_trace = trace && std::getenv("GLOSSA_ALLOC_TRACE") != nullptr;
  for (int j = 0; j + 1 < kJobs; ++j) EXPECT_TRUE(engine.Submit(w.jobs[j]).ok());
  std::vector<Iteration> log;
  log.reserve(4096);
  while (log.size() < 4096) {
    if (log.size() == kLateJobIteration) {
      EXPECT_TRUE(engine.Submit(w.jobs[kJobs - 1]).ok());
    }
    const EngineStats before = engine.stats();
    const uint64_t finished_before = engine.metrics().sentences_total.load();
    const int64_t allocations_before = g_allocations.load();
    const int64_t onednn_before = g_onednn_allocations.load();
    g_counting.store(true);
    const bool ran = engine.RunOnce();
    g_counting.store(false);
    if (g_trace) std::fprintf(stderr, "=== end of iteration %zu\n", log.size());
    if (!ran) break;
    const EngineStats after = engine.stats();
    Iteration it;
    it.allocations = g_allocations.load() - allocations_before;
    it.onednn_allocations = g_onednn_allocations.load() - onednn_before;
    it.admitted = after.queued_sources != before.queued_sources;
    it.retired = engine.metrics().sentences_total.load() != finished_before;
    it.rows = after.step_rows - before.step_rows;
    log.push_back(it);
  }
  return log;
}

// The demo model with `compute_type`'s Linear layers (the reduced-precision paths have buffers of
// their own: quantized inputs, s32 accumulators).
void CheckStepsAllocateNothingOnceWarm(const std::string& compute_type) {
  FindOneDnn();
  ASSERT_LT(g_dnnl_begin, g_dnnl_end) << "libdnnl's address range not found";
  void* warm_backtrace[4];
  backtrace(warm_backtrace, 4);  // its first call loads libgcc_s
  const auto golden = testing::ReadGolden("greedy");
  ModelOptions model_options;
  model_options.compute_type = compute_type;
  auto model = Model::Load(testing::DemoModelPath(), model_options);
  ASSERT_TRUE(model.ok()) << model.status();
  EngineOptions options;
  options.workers = 0;
  Engine engine(*std::move(model), options);

  Workload warm = MakeWorkload(golden);
  Drive(engine, warm, /*trace=*/false);
  ASSERT_EQ(warm.outcome->done, kJobs);
  ASSERT_TRUE(warm.outcome->all_ok);

  Workload measured = MakeWorkload(golden);
  const std::vector<Iteration> log = Drive(engine, measured, /*trace=*/true);
  ASSERT_EQ(measured.outcome->done, kJobs);
  ASSERT_TRUE(measured.outcome->all_ok);

  int quiet_steps = 0, allocating_steps = 0;
  int64_t quiet_rows = 0, onednn = 0, at_admission_or_retirement = 0;
  for (size_t i = 0; i < log.size(); ++i) {
    const Iteration& it = log[i];
    if (it.admitted || it.retired) {
      at_admission_or_retirement += it.allocations;
      continue;
    }
    ++quiet_steps;
    quiet_rows += it.rows;
    onednn += it.onednn_allocations;
    if (it.allocations != 0) {
      ++allocating_steps;
      ADD_FAILURE() << "iteration " << i << " (" << it.rows << " rows, no admission or retirement) "
                    << "allocated " << it.allocations << " times outside oneDNN "
                    << "(GLOSSA_ALLOC_TRACE=1 prints where)";
    }
  }
  std::printf(
      "%zu iterations; %d decoder steps without admission or retirement (%.1f rows on average), "
      "%d of them allocation-free outside oneDNN; oneDNN's primitive execution allocated %.1f "
      "times per step; the iterations with admission or retirement allocated %lld times\n",
      log.size(), quiet_steps, quiet_steps > 0 ? double(quiet_rows) / quiet_steps : 0.0,
      quiet_steps - allocating_steps, quiet_steps > 0 ? double(onednn) / quiet_steps : 0.0,
      static_cast<long long>(at_admission_or_retirement));
  EXPECT_GE(quiet_steps, 40) << "too few steps measured";
  EXPECT_EQ(allocating_steps, 0);
}

TEST(AllocTest, DecoderStepsAllocateNothingOnceWarm) {
  GLOSSA_REQUIRE_SHARED();
  CheckStepsAllocateNothingOnceWarm("float32");
}

TEST(AllocTest, Int8AndBf16StepsAllocateNothingOnceWarm) {
  GLOSSA_REQUIRE_SHARED();
  for (const char* type : {"bfloat16", "int8", "int8_fast"}) {
    SCOPED_TRACE(type);
    CheckStepsAllocateNothingOnceWarm(type);
  }
}

}  // namespace
}  // namespace glossa
