#include "decode/constraints.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace glossa {

absl::Status CheckConstraints(const std::vector<Constraint>& constraints, int vocab_size) {
  for (size_t c = 0; c < constraints.size(); ++c) {
    const auto& alternatives = constraints[c].alternatives;
    if (alternatives.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("constraint ", c, " has no alternative"));
    }
    for (size_t a = 0; a < alternatives.size(); ++a) {
      if (alternatives[a].empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("constraint ", c, ": alternative ", a, " has no token"));
      }
      for (int id : alternatives[a]) {
        if (id < 0 || id >= vocab_size) {
          return absl::InvalidArgumentError(absl::StrCat("constraint ", c, ": token id ", id,
                                                         " is outside the vocabulary [0, ",
                                                         vocab_size, ")"));
        }
      }
    }
    for (size_t a = 0; a < alternatives.size(); ++a) {
      for (size_t b = 0; b < alternatives.size(); ++b) {
        const auto& x = alternatives[a];
        const auto& y = alternatives[b];
        if (a == b || x.size() > y.size()) continue;
        if (std::equal(x.begin(), x.end(), y.begin())) {
          return absl::InvalidArgumentError(absl::StrCat(
              "constraint ", c, ": alternative ", a, x.size() == y.size() ? " equals" : " starts",
              " alternative ", b, " (it would be met by either: drop one)"));
        }
      }
    }
  }
  return absl::OkStatus();
}

ConstraintSet::ConstraintSet(const std::vector<Constraint>& constraints) {
  int roots_fan_out = 0;
  for (const Constraint& constraint : constraints) {
    const int root = static_cast<int>(nodes_.size());
    roots_.push_back(root);
    nodes_.emplace_back();
    int longest = 0;
    for (const auto& alternative : constraint.alternatives) {
      longest = std::max(longest, static_cast<int>(alternative.size()));
      int node = root;
      for (int token : alternative) {
        int child = Child(node, token);
        if (child < 0) {
          child = static_cast<int>(nodes_.size());
          Node n;
          n.token = token;
          n.depth = nodes_[node].depth + 1;
          nodes_.push_back(n);
          if (nodes_[node].last_child < 0) {
            nodes_[node].first_child = child;
          } else {
            nodes_[nodes_[node].last_child].next_sibling = child;
          }
          nodes_[node].last_child = child;
        }
        node = child;
      }
    }
    seqlen_.push_back(longest);
    max_seqlen_ = std::max(max_seqlen_, longest);
  }
  // advance(): the first tokens of every pending constraint, or the next ones of the constraint
  // in progress.
  for (size_t n = 0; n < nodes_.size(); ++n) {
    int fan_out = 0;
    for (int c = nodes_[n].first_child; c >= 0; c = nodes_[c].next_sibling) ++fan_out;
    if (nodes_[n].depth == 0) {
      roots_fan_out += fan_out;
    } else {
      max_advance_ = std::max(max_advance_, fan_out);
    }
  }
  max_advance_ = std::max(max_advance_, roots_fan_out);
}

int ConstraintSet::Child(int node, int token) const {
  for (int c = nodes_[node].first_child; c >= 0; c = nodes_[c].next_sibling) {
    if (nodes_[c].token == token) return c;
  }
  return -1;
}

void ConstraintState::Reset(const ConstraintSet& set) {
  pending_.reserve(set.size());
  pending_.clear();
  for (int c = 0; c < set.size(); ++c) pending_.push_back(c);
  complete_ = 0;
  in_progress_ = -1;
  node_ = -1;
  completed_ = false;
}

bool ConstraintState::Add(const ConstraintSet& set, int token) {
  if (completed_) return false;
  if (in_progress_ >= 0) {
    const int child = set.Child(node_, token);
    if (child < 0) {
      // The token breaks it: pending again from its start, last in the list.
      pending_.push_back(in_progress_);
      in_progress_ = -1;
      return false;
    }
    node_ = child;
    if (set.leaf(child)) {
      ++complete_;
      in_progress_ = -1;
      completed_ = pending_.empty();
    }
    return true;
  }
  // The first pending constraint this token starts (one at most).
  for (size_t i = 0; i < pending_.size(); ++i) {
    const int child = set.Child(set.root(pending_[i]), token);
    if (child < 0) continue;
    if (set.leaf(child)) {
      ++complete_;
    } else {
      in_progress_ = pending_[i];
      node_ = child;
    }
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    completed_ = pending_.empty() && in_progress_ < 0;
    break;
  }
  return false;
}

int ConstraintState::Bank(const ConstraintSet& set) const {
  int bank = complete_ * set.max_seqlen();
  if (in_progress_ >= 0) {
    // max_seqlen - remaining(), remaining() = seqlen - tokens matched.
    bank += set.max_seqlen() - (set.seqlen(in_progress_) - set.depth(node_));
  }
  return bank;
}

void ConstraintState::AdvanceBanks(const ConstraintSet& set, ConstraintState* scratch,
                                   std::vector<AdvanceBank>* out) const {
  out->clear();
  if (completed_) return;
  if (in_progress_ < 0) {
    for (int c : pending_) {
      for (int n = set.first_child(set.root(c)); n >= 0; n = set.next_sibling(n)) {
        *scratch = *this;
        scratch->Add(set, set.token(n));
        out->push_back({set.token(n), scratch->Bank(set)});
      }
    }
    return;
  }
  // Hugging Face's copies share the in-progress constraint's current_seq: a token that steps one
  // copy is appended for every later copy too (a reset gives the copy a list of its own).
  int shared = node_;
  for (int n = set.first_child(node_); n >= 0; n = set.next_sibling(n)) {
    *scratch = *this;
    scratch->node_ = shared;
    if (scratch->Add(set, set.token(n))) shared = scratch->node_;
    out->push_back({set.token(n), scratch->Bank(set)});
  }
}

void ConstrainedCandidates::Reserve(int n) {
  all_.reserve(n);
  zipped_.reserve(n);
  increments_.reserve(n);
  order_.reserve(n);
}

const std::vector<int>& ConstrainedCandidates::Select(int top_k, int beams) {
  const int n = size();
  order_.clear();
  if (n == top_k) {
    for (int i = 0; i < std::min(n, beams); ++i) order_.push_back(i);
    return order_;
  }
  // zipped = all_banks * 100 + all_scores: an int64 tensor plus a float32 one, in float32.
  zipped_.clear();
  for (int i = 0; i < n; ++i) {
    zipped_.push_back({static_cast<float>(all_[i].bank * 100) + all_[i].score, i});
  }
  // torch.sort(descending=True) on the CPU: std::sort with this comparator (KeyValueCompDesc,
  // NaN first) on the values and their indices.
  std::sort(zipped_.begin(), zipped_.end(), [](const auto& a, const auto& b) {
    return (std::isnan(a.first) && !std::isnan(b.first)) || a.first > b.first;
  });
  increments_.clear();
  int counter = -1, run_bank = all_[zipped_[0].second].bank;
  for (const auto& z : zipped_) {
    const int bank = all_[z.second].bank;
    counter = bank == run_bank ? counter + 1 : 0;
    run_bank = bank;
    increments_.push_back(counter);
  }
  // A stable argsort of the increments, its first `beams`.
  for (int increment = 0; static_cast<int>(order_.size()) < std::min(n, beams); ++increment) {
    for (int k = 0; k < n && static_cast<int>(order_.size()) < beams; ++k) {
      if (increments_[k] == increment) order_.push_back(zipped_[k].second);
    }
  }
  return order_;
}

}  // namespace glossa
