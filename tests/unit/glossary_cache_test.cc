// GlossaryCache: a stored glossary's terms and matcher are compiled once and shared by every
// request that names it (the same pointer, one compilation, also when requests come at once);
// a deleted glossary's entry is dropped; a request prepared with a stored glossary, alone or
// with entries of its own, gets the constraints that GlossaryConstraints gives for the terms in
// one list (the stored ones first), errors numbered the same way.
#include "server/request/glossary_cache.h"

#include <memory>
#include <thread>
#include <vector>

#include "engine/text_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/models/model_registry.h"
#include "server/request/request.h"

namespace glossa::server {
namespace {

using ::testing::ElementsAre;

// U+00AD (soft hyphen): a term that the store takes and that NFKC_Casefold empties.
constexpr char kSoftHyphen[] = "\xC2\xAD";

std::unique_ptr<GlossaryStore> OpenStore() {
  auto store = GlossaryStore::Open("");
  EXPECT_TRUE(store.ok()) << store.status();
  return *std::move(store);
}

std::string Create(GlossaryStore& store, const std::string& tsv) {
  v1::CreateGlossaryRequest request;
  request.set_name("g");
  request.set_source_language("es");
  request.set_target_language("en");
  request.set_entries_text(tsv);
  auto info = store.Create(request);
  EXPECT_TRUE(info.ok()) << info.status();
  return info.ok() ? info->glossary_id() : "";
}

std::shared_ptr<const CompiledGlossary> Compiled(const GlossaryCache& cache,
                                                 const std::string& id) {
  auto glossary = cache.Find(id);
  EXPECT_TRUE(glossary.ok()) << glossary.status();
  auto compiled = cache.Compiled(*glossary);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  return compiled.ok() ? *compiled : nullptr;
}

TEST(GlossaryCacheTest, AGlossaryIsCompiledOnceAndShared) {
  auto store = OpenStore();
  const std::string id = Create(*store, "luz\tlight\nDios\tGod\nluz\tbrightness\n");
  GlossaryCache cache(store.get());
  const auto first = Compiled(cache, id);
  const auto second = Compiled(cache, id);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first, second);
  EXPECT_EQ(cache.compilations(), 1);
  ASSERT_EQ(first->terms.size(), 2u);
  EXPECT_EQ(first->terms[0].source, "luz");
  EXPECT_THAT(first->terms[0].targets, ElementsAre("light", "brightness"));
  EXPECT_EQ(first->terms[1].source, "Dios");
  EXPECT_THAT(first->matcher.Match("La LUZ de Dios."), ElementsAre(0, 1));
  EXPECT_EQ(cache.Find("0123").status().code(), absl::StatusCode::kNotFound);
}

TEST(GlossaryCacheTest, RequestsAtOnceWaitForOneCompilation) {
  auto store = OpenStore();
  std::string tsv;
  for (int i = 0; i < 1000; ++i) tsv += "término " + std::to_string(i) + "\tterm\n";
  const std::string id = Create(*store, tsv);
  GlossaryCache cache(store.get());
  std::vector<std::shared_ptr<const CompiledGlossary>> got(8);
  std::vector<std::thread> threads;
  for (auto& compiled : got) threads.emplace_back([&] { compiled = Compiled(cache, id); });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(cache.compilations(), 1);
  for (const auto& compiled : got) EXPECT_EQ(compiled, got[0]);
}

TEST(GlossaryCacheTest, ADeletedGlossaryIsDroppedWhenTheNextIsCompiled) {
  auto store = OpenStore();
  const std::string deleted = Create(*store, "luz\tlight\n");
  GlossaryCache cache(store.get());
  const auto held = Compiled(cache, deleted);  // a request still running with it
  ASSERT_TRUE(store->Delete(deleted).ok());
  EXPECT_EQ(cache.Find(deleted).status().code(), absl::StatusCode::kNotFound);
  const std::string next = Create(*store, "agua\twater\n");
  ASSERT_NE(Compiled(cache, next), nullptr);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.compilations(), 2);
  EXPECT_EQ(held->terms[0].source, "luz");  // what a request holds stays valid
}

TEST(GlossaryCacheTest, AGlossaryThatDoesNotCompileKeepsItsError) {
  auto store = OpenStore();
  const std::string id = Create(*store, std::string("luz\tlight\n") + kSoftHyphen + "\tx\n");
  GlossaryCache cache(store.get());
  for (int i = 0; i < 2; ++i) {
    auto compiled = cache.Compiled(*cache.Find(id));
    EXPECT_EQ(compiled.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(compiled.status().message(), "glossary entry 1: the source term is empty");
  }
  EXPECT_EQ(cache.compilations(), 1);
}

class GlossaryRequestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions options;
    options.workers = 0;  // nothing is translated: requests are only prepared
    auto registry = ModelRegistry::Load({"demo=" GLOSSA_DEMO_MODEL}, options);
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = registry->release();
  }
  static void TearDownTestSuite() {
    delete registry_;
    registry_ = nullptr;
  }

  static v1::TranslateRequest Request(const std::string& glossary_id) {
    v1::TranslateRequest request;
    request.add_texts("Y dijo Dios: Sea la luz; y fue la luz.");
    request.add_texts("Dios es amor.");
    request.add_texts("Nada aquí.");
    request.mutable_options()->set_beam_size(4);
    request.set_glossary_id(glossary_id);
    return request;
  }

  // What GlossaryConstraints gives for `terms` in one list (stored and the request's).
  static std::vector<std::vector<Constraint>> Expected(const PreparedRequest& p,
                                                       const v1::TranslateRequest& request,
                                                       const std::vector<GlossaryTerm>& terms) {
    const std::vector<std::string> texts(request.texts().begin(), request.texts().end());
    auto constraints = GlossaryConstraints(*p.model->model, texts, p.sources, terms, 16);
    EXPECT_TRUE(constraints.ok()) << constraints.status();
    return constraints.ok() ? *constraints : std::vector<std::vector<Constraint>>();
  }

  static std::vector<std::vector<std::vector<std::vector<int>>>> Ids(
      const std::vector<std::vector<Constraint>>& constraints) {
    std::vector<std::vector<std::vector<std::vector<int>>>> ids;
    for (const auto& text : constraints) {
      ids.emplace_back();
      for (const Constraint& c : text) ids.back().push_back(c.alternatives);
    }
    return ids;
  }

  static ModelRegistry* registry_;
};

ModelRegistry* GlossaryRequestTest::registry_ = nullptr;

TEST_F(GlossaryRequestTest, RequestsNamingAGlossaryShareItsCompiledTerms) {
  auto store = OpenStore();
  const std::string id = Create(*store, "luz\tlight\nDios\tGod\nDios\tthe Lord\n");
  GlossaryCache cache(store.get());
  const std::vector<GlossaryTerm> stored = {{"luz", {"light"}}, {"Dios", {"God", "the Lord"}}};
  const v1::TranslateRequest request = Request(id);
  for (int i = 0; i < 3; ++i) {
    auto p = PrepareRequest(request, *registry_, RequestLimits(), false, &cache);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_EQ(p->constraints.size(), 3u);
    EXPECT_EQ(p->constraints[0].size(), 2u);  // luz and Dios
    EXPECT_EQ(Ids(p->constraints), Ids(Expected(*p, request, stored)));
  }
  EXPECT_EQ(cache.compilations(), 1);

  // The request's own entries follow the stored ones, numbered after them.
  v1::TranslateRequest both = request;
  v1::GlossaryEntry* own = both.add_glossary();
  own->set_source("amor");
  own->add_targets("love");
  auto p = PrepareRequest(both, *registry_, RequestLimits(), false, &cache);
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<GlossaryTerm> all = stored;
  all.push_back({"amor", {"love"}});
  EXPECT_EQ(p->constraints[1].size(), 2u);  // Dios and amor
  EXPECT_EQ(Ids(p->constraints), Ids(Expected(*p, both, all)));
  own->set_source(kSoftHyphen);
  EXPECT_EQ(PrepareRequest(both, *registry_, RequestLimits(), false, &cache).status().message(),
            "glossary entry 2: the source term is empty");
  own->set_source("amor");
  own->set_targets(0, "");
  EXPECT_EQ(PrepareRequest(both, *registry_, RequestLimits(), false, &cache).status().message(),
            "glossary entry 2, target 0: the term is empty");
  EXPECT_EQ(cache.compilations(), 1);
}

TEST_F(GlossaryRequestTest, AnUnknownIdIsNotFound) {
  auto store = OpenStore();
  GlossaryCache cache(store.get());
  const std::string id(32, '0');
  auto p = PrepareRequest(Request(id), *registry_, RequestLimits(), false, &cache);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(p.status().message(), "no glossary '" + id + "'");
  p = PrepareRequest(Request(id), *registry_, RequestLimits(), false, nullptr);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache.compilations(), 0);
}

}  // namespace
}  // namespace glossa::server
