// Code shared by Glossa's C++ tests: the demo model, the shared golden data, teacher forcing.
#ifndef GLOSSA_TESTS_COMMON_TEST_UTIL_H_
#define GLOSSA_TESTS_COMMON_TEST_UTIL_H_

#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "engine/model.h"
#include "gtest/gtest.h"
#include "layers/encoder.h"
#include "nlohmann/json.hpp"

namespace glossa::testing {

inline std::string DemoModelPath() { return GLOSSA_DEMO_MODEL; }
// A file's bytes ("" when it cannot be read).
inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
inline std::string SharedDir() { return GLOSSA_SHARED_DIR; }
inline bool HaveShared() { return std::ifstream(SharedDir() + "/golden/greedy.jsonl").good(); }

// The demo model, loaded once per test binary.
inline std::shared_ptr<const Model> DemoModel() {
  static std::shared_ptr<const Model> model = [] {
    auto m = Model::Load(DemoModelPath());
    if (!m.ok()) {
      ADD_FAILURE() << m.status();
      return std::shared_ptr<const Model>();
    }
    return *m;
  }();
  return model;
}

struct GoldenLine {
  int index = 0;
  std::string src;
  std::vector<int> src_ids;
  std::vector<int> out_ids;  // generated ids, without the decoder start token
  std::string hyp;
  double score = 0.0;
};

// ../shared/golden/<name>.jsonl (greedy or beam4).
inline std::vector<GoldenLine> ReadGolden(const std::string& name) {
  std::vector<GoldenLine> lines;
  std::ifstream in(SharedDir() + "/golden/" + name + ".jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    GoldenLine g;
    g.index = j["i"].get<int>();
    g.src = j["src"].get<std::string>();
    g.src_ids = j["src_ids"].get<std::vector<int>>();
    g.out_ids = j["out_ids"].get<std::vector<int>>();
    g.out_ids.erase(g.out_ids.begin());  // decoder start
    g.hyp = j["hyp"].get<std::string>();
    g.score = j["score"].get<double>();
    lines.push_back(std::move(g));
  }
  return lines;
}

#define GLOSSA_REQUIRE_SHARED()                                                              \
  if (!::glossa::testing::HaveShared())                                                      \
  GTEST_SKIP() << "needs the shared golden data at " << ::glossa::testing::SharedDir()       \
               << " (set -DGLOSSA_SHARED_DIR); it is not part of the repository"

// Logits of every step when the decoder is fed `prefix` (decoder start first) for one source,
// through the production path: Encoder, cross K/V, Decoder::Step with the KV cache;
// after_cross_kv, when given, sees (and may change) the batch once its cross K/V are made.
// Result: [prefix.size()][target_vocab]. cross_attention, when given, receives each step's
// DecoderRow::cross_attention: [prefix.size()][decoder_layers * source.size()].
std::vector<std::vector<float>> TeacherForcedLogits(
    const Model& model, const std::vector<int>& source, const std::vector<int>& prefix,
    const std::function<void(EncodedBatch&)>& after_cross_kv = {},
    std::vector<std::vector<float>>* cross_attention = nullptr);

}  // namespace glossa::testing

#endif  // GLOSSA_TESTS_COMMON_TEST_UTIL_H_
