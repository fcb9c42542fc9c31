// Catalogued models (--models_dir, `dir=`): parsed from a --model_config, loaded by their first
// Find, unloaded least recently used first under a memory budget, with the demo model under
// several names.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/models/model_config.h"
#include "server/models/model_registry.h"
#include "server/models/router.h"

namespace glossa::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ModelDefaults Defaults() {
  ModelDefaults d;
  d.engine_options.workers = 1;
  d.engine_options.threads_per_worker = 1;
  return d;
}

// A folder of links to the demo model: a.glossa, b.glossa, c.glossa, and a file that is not one.
class CatalogueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("glossa-catalogue-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    for (const char* name : {"a", "b", "c"}) {
      std::filesystem::create_symlink(GLOSSA_DEMO_MODEL, dir_ / (std::string(name) + ".glossa"));
    }
    std::FILE* f = std::fopen((dir_ / "notes.txt").c_str(), "w");
    std::fclose(f);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<ModelRegistry> Catalogue(const std::string& extra = "") {
    auto served = ParseServedModels("dir=" + dir_.string() + "\n" + extra, Defaults());
    EXPECT_TRUE(served.ok()) << served.status();
    auto registry = ModelRegistry::Load(served->specs);
    EXPECT_TRUE(registry.ok()) << registry.status();
    if (served->max_loaded_mb > 0) (*registry)->SetBudget(served->max_loaded_mb << 20);
    return *std::move(registry);
  }
  static ModelState StateOf(const ModelRegistry& registry, const std::string& name) {
    return registry.catalogue().at(name).state;
  }
  // The bytes one demo model is expected to take before it loads.
  static int64_t DemoBytes(const ModelRegistry& registry) {
    return ExpectedBytes(*registry.catalogue().begin()->second.card);
  }

  std::filesystem::path dir_;
};

TEST_F(CatalogueTest, DirLinesListEveryModelFileAndANamedEntryWins) {
  auto served = ParseServedModels("a=" + std::string(GLOSSA_DEMO_MODEL) +
                                      " priority=3\ndir=" + dir_.string() +
                                      " compute_type=int8\nmax_loaded_mb=300\n",
                                  Defaults());
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->max_loaded_mb, 300);
  std::vector<std::string> names;
  for (const ModelSpec& s : served->specs) names.push_back(s.name);
  EXPECT_THAT(names, ElementsAre("a", "b", "c"));
  EXPECT_FALSE(served->specs[0].on_demand);  // listed by name: loaded at once
  EXPECT_EQ(served->specs[0].priority, 3);
  EXPECT_TRUE(served->specs[1].on_demand);
  EXPECT_EQ(served->specs[1].model_options.compute_type, "int8");

  auto json = ParseServedModels(
      R"({"dirs": [")" + dir_.string() + R"("], "max_loaded_mb": 40})", Defaults());
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->specs.size(), 3u);
  EXPECT_EQ(json->max_loaded_mb, 40);

  auto missing = ParseServedModels("dir=/no/such/folder\n", Defaults());
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("/no/such/folder"));
  EXPECT_FALSE(ParseServedModels("max_loaded_mb=lots\n", Defaults()).ok());
}

TEST_F(CatalogueTest, AModelLoadsOnItsFirstFind) {
  auto registry = Catalogue();
  EXPECT_TRUE(registry->models().empty());
  EXPECT_EQ(registry->cards().size(), 3u);
  EXPECT_EQ(StateOf(*registry, "b"), ModelState::kNotLoaded);
  // Routing sees it before it loads.
  auto route = RouteLanguages(registry->cards(), "es", "en", "");
  ASSERT_TRUE(route.ok()) << route.status();

  auto b = registry->Find("b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->name, "b");
  EXPECT_EQ(StateOf(*registry, "b"), ModelState::kLoaded);
  EXPECT_GT(registry->catalogue().at("b").resident_bytes, 0);
  EXPECT_EQ(registry->Find("b").value(), *b);  // loaded once
  const auto stats = registry->residency_stats();
  EXPECT_EQ(stats.loads.at("request"), 1u);
  EXPECT_EQ(stats.waited_for_load, 1u);
  EXPECT_EQ(stats.loaded, 1);
  EXPECT_EQ(registry->cold_start_seconds().Read().count, 1u);
  EXPECT_EQ(registry->Find("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CatalogueTest, TheLeastRecentlyUsedIdleModelMakesRoom) {
  auto registry = Catalogue();
  ASSERT_TRUE(registry->Find("a").ok());
  const int64_t one = registry->catalogue().at("a").resident_bytes;  // as measured at its load
  registry->SetBudget(one * 2 + one / 2);  // two fit, not three
  ASSERT_TRUE(registry->Find("b").ok());
  ASSERT_TRUE(registry->Find("a").ok());  // b is now the least recently used
  ASSERT_TRUE(registry->Find("c").ok());
  EXPECT_EQ(StateOf(*registry, "a"), ModelState::kLoaded);
  EXPECT_EQ(StateOf(*registry, "b"), ModelState::kNotLoaded);
  EXPECT_EQ(StateOf(*registry, "c"), ModelState::kLoaded);
  EXPECT_EQ(registry->residency_stats().unloads.at("budget"), 1u);
  EXPECT_LE(registry->residency_stats().loaded_bytes, registry->budget());

  ASSERT_TRUE(registry->Find("c").ok());  // c, used twice now, was used last
  registry->SetBudget(one + one / 2);   // a smaller budget unloads at once
  EXPECT_EQ(registry->models().size(), 1u);
  EXPECT_EQ(StateOf(*registry, "c"), ModelState::kLoaded);  // the most recently used stays
}

// Least recently used by the use before last (LRU-2): requests to other models, one each and
// back to back, do not unload a model in steady use whose last request began before theirs.
TEST_F(CatalogueTest, OneOffRequestsDoNotUnloadAModelInSteadyUse) {
  auto registry = Catalogue();
  ASSERT_TRUE(registry->Find("a").ok());
  const int64_t one = registry->catalogue().at("a").resident_bytes;
  registry->SetBudget(one * 2 + one / 2);  // two fit, not three
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(registry->Find("a").ok());  // steady use
  ASSERT_TRUE(registry->Find("b").ok());  // used once, after a's last request
  ASSERT_TRUE(registry->Find("c").ok());
  EXPECT_EQ(StateOf(*registry, "a"), ModelState::kLoaded);
  EXPECT_EQ(StateOf(*registry, "b"), ModelState::kNotLoaded);
  EXPECT_EQ(StateOf(*registry, "c"), ModelState::kLoaded);
  ASSERT_TRUE(registry->Find("b").ok());  // and the next one-off request unloads c, not a
  EXPECT_EQ(StateOf(*registry, "a"), ModelState::kLoaded);
  EXPECT_EQ(StateOf(*registry, "c"), ModelState::kNotLoaded);
}

TEST_F(CatalogueTest, ALoadWaitsForABusyModelToFinishItsRequest) {
  auto registry = Catalogue();
  registry->SetBudget(DemoBytes(*registry) * 3 / 2);  // one at a time
  auto a = registry->Find("a");
  ASSERT_TRUE(a.ok());
  auto b = std::async(std::launch::async, [&] { return registry->Find("b"); });
  // b waits while a request holds a, which keeps serving.
  EXPECT_EQ(b.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout);
  EXPECT_EQ(StateOf(*registry, "b"), ModelState::kLoading);
  EXPECT_EQ(StateOf(*registry, "a"), ModelState::kLoaded);
  a->reset();  // the request ends
  auto loaded = b.get();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(StateOf(*registry, "b"), ModelState::kLoaded);
  EXPECT_EQ(StateOf(*registry, "a"), ModelState::kNotLoaded);
}

TEST_F(CatalogueTest, AModelThatStaysBusyDrainsWhileTheLoadGoesOn) {
  auto registry = Catalogue();
  registry->SetBudget(DemoBytes(*registry) * 3 / 2);
  auto a = registry->Find("a");
  ASSERT_TRUE(a.ok());
  const auto start = std::chrono::steady_clock::now();
  auto b = registry->Find("b");  // a is still held: after a while it is unloaded anyway
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  EXPECT_EQ(StateOf(*registry, "a"), ModelState::kNotLoaded);  // takes no new request
  EXPECT_EQ(registry->reload_stats().retiring, 1);               // draining: still held
  EXPECT_TRUE((*a)->engine != nullptr);
  a->reset();
}

TEST_F(CatalogueTest, AModelBiggerThanTheWholeBudgetIsRefused) {
  auto registry = Catalogue();
  registry->SetBudget(DemoBytes(*registry) / 2);
  auto a = registry->Find("a");
  EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(a.status().message(), HasSubstr("memory budget"));
  EXPECT_EQ(StateOf(*registry, "a"), ModelState::kNotLoaded);
}

TEST_F(CatalogueTest, AReloadCataloguesNewFilesAndForgetsRemovedOnes) {
  auto registry = Catalogue();
  ASSERT_TRUE(registry->Find("a").ok());
  std::filesystem::remove(dir_ / "a.glossa");
  std::filesystem::create_symlink(GLOSSA_DEMO_MODEL, dir_ / "d.glossa");
  auto served = ParseServedModels("dir=" + dir_.string() + "\n", Defaults());
  ASSERT_TRUE(served.ok()) << served.status();
  const ModelRegistry::ApplyResult r = registry->Apply(served->specs);
  EXPECT_THAT(r.added, ElementsAre("d"));
  EXPECT_THAT(r.removed, ElementsAre("a"));
  EXPECT_EQ(StateOf(*registry, "d"), ModelState::kNotLoaded);
  EXPECT_EQ(registry->Find("a").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace glossa::server
