// A model file overwritten in place while its Model is loaded, the way `cp new.glossa
// served.glossa` does it (the same inode truncated, then written again): the process keeps
// running, what the load copied out of the file keeps translating exactly as before, and a
// translation that needs a byte still read from the file fails with DATA_LOSS naming the file
// instead of reading the new bytes (or faulting on the truncated mapping with SIGBUS).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "engine/model.h"
#include "engine/translator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace glossa {
namespace {

using ::testing::HasSubstr;

// What `cp` does to an existing destination: open it with O_TRUNC (same inode), write the bytes.
void OverwriteInPlace(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0) << path;
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    ASSERT_GT(n, 0);
    done += static_cast<size_t>(n);
  }
  ASSERT_EQ(::close(fd), 0);
}

std::vector<std::string> Texts(const absl::StatusOr<std::vector<Translation>>& translations) {
  std::vector<std::string> texts;
  if (!translations.ok()) return texts;
  for (const Translation& t : *translations) texts.push_back(t.hypotheses.at(0).text);
  return texts;
}

const std::vector<std::string> kSeen = {
    "Y dijo Dios: Sea la luz; y fue la luz.",
    "En el principio creó Dios los cielos y la tierra.",
    "Y llamó Dios a la luz Día, y a las tinieblas llamó Noche.",
};
// Words that kSeen does not hold: their embedding rows were never copied out of the file.
const std::vector<std::string> kUnseen = {"Los pescadores remendaban sus redes junto al mar."};

// The replacement bytes: a smaller file (the mapping's end is past the new end of the file), or
// one of the same size whose bytes all differ (no read comes up short).
enum class Replacement { kShorter, kSameSize };

class ModelOverwriteTest : public ::testing::TestWithParam<Replacement> {
 protected:
  void SetUp() override {
    original_ = testing::ReadFileBytes(testing::DemoModelPath());
    ASSERT_GT(original_.size(), 1000u) << "demo model missing: " << testing::DemoModelPath();
    path_ = ::testing::TempDir() + "/overwritten_" + std::to_string(static_cast<int>(GetParam())) +
            ".glossa";
    std::ofstream(path_, std::ios::binary) << original_;
  }
  void TearDown() override { std::remove(path_.c_str()); }

  std::string Replacement() const {
    if (GetParam() == Replacement::kShorter) return std::string(original_.size() / 3, 'x');
    std::string bytes = original_;
    for (char& c : bytes) c = static_cast<char>(~c);
    return bytes;
  }

  std::string original_, path_;
};

TEST_P(ModelOverwriteTest, WhatWasCopiedOutTranslatesAsBeforeAndTheRestIsRefused) {
  auto model = Model::Load(path_);
  ASSERT_TRUE(model.ok()) << model.status();
  Translator translator(*model);
  TranslateOptions beam;
  beam.beam_size = 4;
  const auto before = translator.Translate(kSeen, beam);
  ASSERT_TRUE(before.ok()) << before.status();
  // Beam search started packing the output projection on a thread of its own: wait for it, so
  // that every weight kSeen's translation reads is in memory the model owns.
  (*model)->weights().lm_head->EnsurePacked();

  OverwriteInPlace(path_, Replacement());
  const auto after = translator.Translate(kSeen, beam);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(Texts(*after), Texts(*before));

  // Rows of kUnseen's words are still in the file: the translation is refused, and so is every
  // one after it, since what was read once the file changed cannot be trusted.
  TranslateOptions greedy;
  greedy.beam_size = 1;
  greedy.scores = false;
  const auto unseen = translator.Translate(kUnseen, greedy);
  ASSERT_FALSE(unseen.ok());
  EXPECT_EQ(unseen.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(unseen.status().message(), HasSubstr(path_));
  EXPECT_THAT(unseen.status().message(), HasSubstr("changed on disk after it was loaded"));
  const auto again = translator.Translate(kSeen, beam);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kDataLoss);

  // The replaced file itself is refused at load, with a message naming it.
  auto reloaded = Model::Load(path_);
  ASSERT_FALSE(reloaded.ok());
  EXPECT_THAT(reloaded.status().message(), HasSubstr(path_));
}

// Greedy decoding with the argmax screen leaves the float32 output projection in the file
// (where the CPU has AVX-512 VNNI) and reads the slabs of each step's candidates from it: after
// the file changed, those reads are refused too.
TEST_P(ModelOverwriteTest, TheProjectionLeftInTheFileIsNotReadOnceTheFileChanged) {
  auto model = Model::Load(path_);
  ASSERT_TRUE(model.ok()) << model.status();
  Translator translator(*model);
  TranslateOptions greedy;
  greedy.beam_size = 1;
  greedy.scores = false;
  const auto before = translator.Translate(kSeen, greedy);
  ASSERT_TRUE(before.ok()) << before.status();
  if (!(*model)->weights().lm_head->packing_deferred()) {
    GTEST_SKIP() << "no argmax screen on this CPU: the projection was packed at load";
  }
  OverwriteInPlace(path_, Replacement());
  const auto after = translator.Translate(kSeen, greedy);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(after.status().message(), HasSubstr(path_));
}

INSTANTIATE_TEST_SUITE_P(Replacements, ModelOverwriteTest,
                         ::testing::Values(Replacement::kShorter, Replacement::kSameSize),
                         [](const ::testing::TestParamInfo<Replacement>& info) {
                           return info.param == Replacement::kShorter ? "Shorter" : "SameSize";
                         });

}  // namespace
}  // namespace glossa
