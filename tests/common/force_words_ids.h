// Hugging Face's force_words_ids, as the constraint goldens hold them, into Glossa's constraints.
#ifndef GLOSSA_TESTS_COMMON_FORCE_WORDS_IDS_H_
#define GLOSSA_TESTS_COMMON_FORCE_WORDS_IDS_H_

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "decode/constraints.h"

namespace glossa::testing {

// A list of ids is a PhrasalConstraint, a list of lists a DisjunctiveConstraint.
inline std::vector<Constraint> ParseForceWordsIds(const nlohmann::json& force_words_ids) {
  std::vector<Constraint> constraints;
  for (const auto& word : force_words_ids) {
    Constraint c;
    if (word.at(0).is_array()) {
      c.alternatives = word.get<std::vector<std::vector<int>>>();
    } else {
      c.alternatives = {word.get<std::vector<int>>()};
    }
    constraints.push_back(std::move(c));
  }
  return constraints;
}

}  // namespace glossa::testing

#endif  // GLOSSA_TESTS_COMMON_FORCE_WORDS_IDS_H_
