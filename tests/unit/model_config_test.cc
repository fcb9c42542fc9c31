// --model_config: parsing (text and JSON), diffing, and the registry's live changes
// (ModelRegistry::Apply) with the demo model.
#include "server/models/model_config.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/models/model_registry.h"

namespace glossa::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

ModelDefaults Defaults() {
  ModelDefaults d;
  d.engine_options.workers = 1;
  d.engine_options.threads_per_worker = 1;
  d.engine_options.max_active_sequences = 64;
  d.engine_options.max_active_rows = 256;
  d.model_options.compute_type = "";
  return d;
}

TEST(ModelConfigTest, TextLinesWithOptionsAndComments) {
  auto specs = ParseModelConfig(
      "# the models\n"
      "a=/m/a.glossa\n"
      "\n"
      "  b=rel/b.glossa   compute_type=int8 workers=3 threads=2  # tuned\r\n"
      "c=/m/c.glossa max_active_sequences=8 kv_cache_mb=16 float32_output_layer=true "
      "argmax_screen=false\n",
      Defaults(), "/etc/glossa");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 3u);
  const ModelSpec &a = (*specs)[0], &b = (*specs)[1], &c = (*specs)[2];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.path, "/m/a.glossa");
  EXPECT_EQ(a.engine_options.workers, 1);  // the defaults
  EXPECT_EQ(a.model_options.compute_type, "");
  EXPECT_EQ(b.path, "/etc/glossa/rel/b.glossa");  // relative to the file
  EXPECT_EQ(b.model_options.compute_type, "int8");
  EXPECT_EQ(b.engine_options.workers, 3);
  EXPECT_EQ(b.engine_options.threads_per_worker, 2);
  EXPECT_EQ(c.engine_options.max_active_sequences, 8);
  EXPECT_EQ(c.engine_options.max_active_rows, 32);
  EXPECT_EQ(c.engine_options.kv_cache_bytes, int64_t{16} << 20);
  EXPECT_TRUE(c.model_options.float32_output_layer);
  EXPECT_TRUE(a.model_options.argmax_screen);  // the default
  EXPECT_FALSE(c.model_options.argmax_screen);
}

TEST(ModelConfigTest, JsonObjectAndArrayForms) {
  auto object = ParseModelConfig(
      R"({"models": {"a": "/m/a.glossa",
                     "b": {"path": "b.glossa", "compute_type": "bfloat16", "workers": 2,
                           "float32_output_layer": true}}})",
      Defaults(), "/base");
  ASSERT_TRUE(object.ok()) << object.status();
  ASSERT_EQ(object->size(), 2u);
  EXPECT_EQ((*object)[0].name, "a");
  EXPECT_EQ((*object)[1].path, "/base/b.glossa");
  EXPECT_EQ((*object)[1].model_options.compute_type, "bfloat16");
  EXPECT_EQ((*object)[1].engine_options.workers, 2);
  EXPECT_TRUE((*object)[1].model_options.float32_output_layer);

  auto array = ParseModelConfig(
      R"( {"models": [{"name": "x", "path": "/m/x.glossa", "threads": 4}]})", Defaults());
  ASSERT_TRUE(array.ok()) << array.status();
  ASSERT_EQ(array->size(), 1u);
  EXPECT_EQ((*array)[0].name, "x");
  EXPECT_EQ((*array)[0].engine_options.threads_per_worker, 4);
}

TEST(ModelConfigTest, MistakesAreNamed) {
  const struct {
    const char* text;
    const char* message;
  } kCases[] = {
      {"a=/m/a\nb\n", "line 2"},
      {"a=/m/a colour=red\n", "unknown option 'colour'"},
      {"a=/m/a workers=many\n", "workers="},
      {"a=/m/a threads=0\n", "threads="},
      {"a=/m/a float32_output_layer=maybe\n", "true or false"},
      {"a=/m/a argmax_screen=1.5\n", "argmax_screen="},
      {"a=/m/a\na=/m/b\n", "listed twice"},
      {"# nothing\n\n", "lists no model"},
      {"", "lists no model"},
      {"{\"models\": {\"a\": \"/m/a\",}", "not valid JSON"},
      {"{\"model\": {}}", "\"models\""},
      {"{\"models\": {\"a\": 3}}", "model 'a'"},
      {"{\"models\": {\"a\": {\"compute_type\": \"int8\"}}}", "no \"path\""},
      {"{\"models\": {\"a\": {\"path\": \"/m\", \"workers\": 1.5}}}", "'workers'"},
      {"{\"models\": [{\"path\": \"/m\"}]}", "models[0]"},
      {"{\"models\": {\"a b\": \"/m\"}}", "space"},
  };
  for (const auto& c : kCases) {
    auto specs = ParseModelConfig(c.text, Defaults());
    ASSERT_FALSE(specs.ok()) << c.text;
    EXPECT_EQ(specs.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(specs.status().message()), HasSubstr(c.message)) << c.text;
  }
}

TEST(ModelConfigTest, ModelFlagAsBefore) {
  auto named = ParseModelFlag("demo=/m/x.glossa", Defaults());
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->name, "demo");
  auto bare = ParseModelFlag("/m/opus.glossa", Defaults());
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->name, "opus");
  EXPECT_FALSE(ParseModelFlag("=x", Defaults()).ok());
}

TEST(ModelConfigTest, DiffNamesRemovedAddedAndChanged) {
  auto before = ParseModelConfig("a=/m/a\nb=/m/b\nc=/m/c workers=2\n", Defaults());
  auto after = ParseModelConfig("b=/m/b\nc=/m/c workers=3\nd=/m/d\n", Defaults());
  ASSERT_TRUE(before.ok() && after.ok());
  const ModelConfigDiff diff = DiffModelSpecs(*before, *after);
  EXPECT_THAT(diff.removed, ElementsAre("a"));
  EXPECT_THAT(diff.added, ElementsAre("d"));
  EXPECT_THAT(diff.changed, ElementsAre("c"));
  const ModelConfigDiff none = DiffModelSpecs(*after, *after);
  EXPECT_THAT(none.removed, IsEmpty());
  EXPECT_THAT(none.added, IsEmpty());
  EXPECT_THAT(none.changed, IsEmpty());
}

TEST(ModelConfigTest, StampSeesAReplacedFile) {
  char name[] = "/tmp/glossa-stamp-XXXXXX";
  const int fd = mkstemp(name);
  ASSERT_GE(fd, 0);
  close(fd);
  const FileStamp before = StampFile(name);
  EXPECT_TRUE(before.exists);
  std::ofstream(std::string(name) + ".new") << "other";
  ASSERT_EQ(std::rename((std::string(name) + ".new").c_str(), name), 0);
  EXPECT_NE(StampFile(name), before);
  std::remove(name);
  EXPECT_FALSE(StampFile(name).exists);
}

// The registry's live changes, with the demo model under several names.
class RegistryApplyTest : public ::testing::Test {
 protected:
  std::vector<ModelSpec> Specs(const std::string& text) {
    auto specs = ParseModelConfig(text, Defaults());
    EXPECT_TRUE(specs.ok()) << specs.status();
    return specs.ok() ? *specs : std::vector<ModelSpec>{};
  }
  static std::string Demo() { return GLOSSA_DEMO_MODEL; }
  // Waits for the reaper to unload every retired model.
  static bool Drained(const ModelRegistry& registry) {
    for (int i = 0; i < 100 && registry.reload_stats().retiring > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return registry.reload_stats().retiring == 0;
  }
};

TEST_F(RegistryApplyTest, AddReplaceRemoveAndAFailedLoadChangesNothing) {
  auto loaded = ModelRegistry::Load(Specs("a=" + Demo() + "\n"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ModelRegistry& registry = **loaded;
  std::vector<std::pair<std::string, bool>> events;
  registry.SetServingCallback(
      [&](const std::string& name, bool serving) { events.push_back({name, serving}); });
  auto a = registry.Find("a");
  ASSERT_TRUE(a.ok());
  const uint64_t a_generation = (*a)->generation;

  // Add b: the same file and options share a's mapping.
  ModelRegistry::ApplyResult r = registry.Apply(Specs("a=" + Demo() + "\nb=" + Demo() + "\n"));
  EXPECT_THAT(r.added, ElementsAre("b"));
  EXPECT_THAT(r.failed, IsEmpty());
  auto b = registry.Find("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->model, (*a)->model);
  EXPECT_NE((*b)->engine.get(), (*a)->engine.get());
  EXPECT_THAT(events, ElementsAre(std::pair<std::string, bool>{"b", false},
                                  std::pair<std::string, bool>{"b", true}));
  events.clear();

  // Replace a (another worker count): a new engine and generation; the holder keeps the old one.
  r = registry.Apply(Specs("a=" + Demo() + " workers=2\nb=" + Demo() + "\n"));
  EXPECT_THAT(r.replaced, ElementsAre("a"));
  auto a2 = registry.Find("a");
  ASSERT_TRUE(a2.ok());
  EXPECT_NE((*a2)->generation, a_generation);
  EXPECT_EQ((*a2)->engine->options().workers, 2);
  EXPECT_EQ((*a)->engine->options().workers, 1);  // still alive while held
  EXPECT_EQ(registry.reload_stats().retiring, 1);
  a->reset();
  EXPECT_TRUE(Drained(registry));
  EXPECT_THAT(events, ElementsAre(std::pair<std::string, bool>{"a", true}));
  events.clear();

  // A broken file for b: b keeps serving its model; the failure is counted.
  const uint64_t b_generation = (*b)->generation;
  r = registry.Apply(Specs("a=" + Demo() + " workers=2\nb=/nonexistent/model.glossa\n"));
  EXPECT_THAT(r.failed, ElementsAre("b"));
  auto b2 = registry.Find("b");
  ASSERT_TRUE(b2.ok());
  EXPECT_EQ((*b2)->generation, b_generation);
  EXPECT_EQ(registry.reload_stats().load_failures.at("b"), 1u);
  EXPECT_THAT(events, IsEmpty());

  // Remove b: NOT_FOUND at once; the holders finish with it.
  r = registry.Apply(Specs("a=" + Demo() + " workers=2\n"));
  EXPECT_THAT(r.removed, ElementsAre("b"));
  EXPECT_EQ(registry.Find("b").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.Find("").value()->name, "a");  // the only model again
  EXPECT_THAT(events, ElementsAre(std::pair<std::string, bool>{"b", false}));
  EXPECT_EQ((*b2)->name, "b");
  b->reset();
  b2->reset();
  EXPECT_TRUE(Drained(registry));
  EXPECT_EQ(registry.models().size(), 1u);

  // Unchanged: nothing happens.
  r = registry.Apply(Specs("a=" + Demo() + " workers=2\n"));
  EXPECT_THAT(r.added, IsEmpty());
  EXPECT_THAT(r.replaced, IsEmpty());
  EXPECT_THAT(r.removed, IsEmpty());
  registry.Shutdown(absl::Now());
}

TEST_F(RegistryApplyTest, AReplacedFileIsReloadedUnderTheSameName) {
  char dir[] = "/tmp/glossa-reload-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/m.glossa";
  ASSERT_EQ(symlink(Demo().c_str(), path.c_str()), 0);
  auto loaded = ModelRegistry::Load(Specs("m=" + path + "\n"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ModelRegistry& registry = **loaded;
  const uint64_t generation = registry.Find("m").value()->generation;
  // The same config, but the file at the path is now another one (a copy).
  {
    std::ifstream in(Demo(), std::ios::binary);
    std::ofstream out(path + ".new", std::ios::binary);
    out << in.rdbuf();
  }
  ASSERT_EQ(std::rename((path + ".new").c_str(), path.c_str()), 0);
  ModelRegistry::ApplyResult r = registry.Apply(Specs("m=" + path + "\n"));
  EXPECT_THAT(r.replaced, ElementsAre("m"));
  EXPECT_NE(registry.Find("m").value()->generation, generation);
  // A truncated replacement fails to load and leaves the model serving.
  const uint64_t good = registry.Find("m").value()->generation;
  {
    std::ofstream out(path + ".new", std::ios::binary);
    out << "GLOSSA but not really";
  }
  ASSERT_EQ(std::rename((path + ".new").c_str(), path.c_str()), 0);
  r = registry.Apply(Specs("m=" + path + "\n"));
  EXPECT_THAT(r.failed, ElementsAre("m"));
  EXPECT_EQ(registry.Find("m").value()->generation, good);
  registry.Shutdown(absl::Now());
  std::remove(path.c_str());
  rmdir(dir);
}

// Requests on other threads find, hold and drop the model while Apply replaces it again and
// again: whichever thread drops a replaced model last, the reaper unloads it.
TEST_F(RegistryApplyTest, ModelsDroppedOnOtherThreadsAreAllUnloaded) {
  auto loaded = ModelRegistry::Load(Specs("a=" + Demo() + "\n"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ModelRegistry& registry = **loaded;
  std::atomic<bool> stop{false};
  std::atomic<int> found{0};
  std::vector<std::thread> requests;
  for (int i = 0; i < 4; ++i) {
    requests.emplace_back([&] {
      while (!stop.load()) {
        {
          auto a = registry.Find("a");
          if (a.ok()) ++found;
          std::this_thread::sleep_for(std::chrono::microseconds(300));  // held meanwhile
        }  // maybe the last reference to a replaced model
        registry.reload_stats();  // reads the retiring models beside the reaper
      }
    });
  }
  std::set<uint64_t> generations;
  for (int i = 0; i < 6; ++i) {
    const std::string workers = i % 2 == 0 ? " workers=2" : "";
    ModelRegistry::ApplyResult r = registry.Apply(Specs("a=" + Demo() + workers + "\n"));
    EXPECT_THAT(r.replaced, ElementsAre("a"));
    generations.insert(registry.Find("a").value()->generation);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop = true;
  for (std::thread& t : requests) t.join();
  EXPECT_GT(found.load(), 0);
  EXPECT_EQ(generations.size(), 6u);
  EXPECT_TRUE(Drained(registry));
  EXPECT_EQ(registry.models().size(), 1u);
  registry.Shutdown(absl::Now());
}

}  // namespace
}  // namespace glossa::server
