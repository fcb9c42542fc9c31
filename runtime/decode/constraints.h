// The parts of Hugging Face's constrained beam search (transformers 4.47.1, `generate(num_beams=N,
// force_words_ids=...)`) that know nothing of the model: the constraints, the progress of one
// hypothesis through them (beam_constraints.py's ConstraintListState), and the order in which
// ConstrainedBeamSearchScorer.step_sentence_constraint keeps a step's candidates. Search
// (search.h) runs the beams.
//
// Every constraint is a trie of its alternatives: a PhrasalConstraint is a trie of one path, a
// DisjunctiveConstraint's DisjunctiveTrie one of several, its children in the order the
// alternatives first name them (as the trie's dicts). On such tries the two classes behave the
// same (advance, update, reset, remaining, seqlen), so one code serves both.
//
// Hugging Face's behaviour is reproduced as it is, quirks included:
//   - a token that breaks the constraint in progress sends it back to the end of the pending list,
//     and that token is not tried against any constraint (so "a a b" does not meet "a b");
//   - DisjunctiveConstraint.copy(stateful=True) shares its current_seq list with the original, so
//     the advance candidates of one hypothesis in the middle of a disjunctive constraint see the
//     tokens their predecessors appended (AdvanceBanks);
//   - the candidates are ordered by bank * 100 + score (float32; the bank does not always win);
//   - torch.sort on the CPU is std::sort with a "greater" comparator on the values (libstdc++'s
//     introsort: stable up to 16 elements, its own order of ties beyond), so Select calls
//     std::sort the same way.
#ifndef GLOSSA_RUNTIME_DECODE_CONSTRAINTS_H_
#define GLOSSA_RUNTIME_DECODE_CONSTRAINTS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace glossa {

// The output must contain one of `alternatives` (token-id sequences, each as it appears in the
// output). One alternative: Hugging Face's PhrasalConstraint; several: its DisjunctiveConstraint.
struct Constraint {
  std::vector<std::vector<int>> alternatives;
};

// OK when `constraints` are valid for a vocabulary of `vocab_size` ids; else INVALID_ARGUMENT
// naming the first problem: a constraint without alternatives, an empty alternative, an id
// outside [0, vocab_size), or an alternative that starts another one (or equals it: Hugging
// Face's DisjunctiveTrie refuses both).
absl::Status CheckConstraints(const std::vector<Constraint>& constraints, int vocab_size);

// The constraints' tries, shared by every hypothesis of a search.
class ConstraintSet {
 public:
  ConstraintSet() = default;
  // The constraints must pass CheckConstraints.
  explicit ConstraintSet(const std::vector<Constraint>& constraints);

  int size() const { return static_cast<int>(roots_.size()); }
  bool empty() const { return roots_.empty(); }
  // ConstraintListState.max_seqlen: the longest alternative of any constraint.
  int max_seqlen() const { return max_seqlen_; }
  // The most tokens ConstraintListState.advance() can return.
  int max_advance() const { return max_advance_; }

  int root(int constraint) const { return roots_[constraint]; }
  // The longest alternative of this constraint (its `seqlen`).
  int seqlen(int constraint) const { return seqlen_[constraint]; }
  int token(int node) const { return nodes_[node].token; }
  int depth(int node) const { return nodes_[node].depth; }
  int first_child(int node) const { return nodes_[node].first_child; }
  int next_sibling(int node) const { return nodes_[node].next_sibling; }
  bool leaf(int node) const { return nodes_[node].first_child < 0; }
  // The child of `node` for `token`, -1 when none.
  int Child(int node, int token) const;

 private:
  struct Node {
    int token = -1;
    int depth = 0;  // tokens from the root
    int first_child = -1, last_child = -1, next_sibling = -1;
  };
  std::vector<Node> nodes_;
  std::vector<int> roots_, seqlen_;
  int max_seqlen_ = 0, max_advance_ = 0;
};

// An advance token and the bank Hugging Face gives the hypothesis it makes.
struct AdvanceBank {
  int token;
  int bank;
};

// Hugging Face's ConstraintListState of one hypothesis: the constraints met, the one in progress
// (with the tokens matched so far, as a trie node), the pending ones in their order. The state
// after a sequence is Reset() then Add() of each of its tokens, the decoder start first (Hugging
// Face's reset(input_ids)).
class ConstraintState {
 public:
  // init_state(): every constraint pending, in order. Also reserves room for all of them, so
  // that copying another state of the same set into this one (operator=) allocates nothing.
  void Reset(const ConstraintSet& set);
  // add(token). Returns true when the token stepped the constraint that was in progress (what
  // the copies of AdvanceBanks share), false otherwise.
  bool Add(const ConstraintSet& set, int token);
  // Every constraint met: the hypothesis may end.
  bool completed() const { return completed_; }
  // get_bank(): max_seqlen per constraint met, plus the progress of the one in progress.
  int Bank(const ConstraintSet& set) const;
  // step_sentence_constraint's advance candidates of a hypothesis in this state, which must not
  // be completed(): each token of advance() (the in-progress constraint's next tokens, else the
  // first tokens of every pending one, in order) with the bank of the state Hugging Face makes
  // for it: a stateful copy of this one plus the token, where a disjunctive constraint in
  // progress carries the tokens the earlier copies appended. `scratch` is a Reset() state of the
  // same set; `out` is replaced.
  void AdvanceBanks(const ConstraintSet& set, ConstraintState* scratch,
                    std::vector<AdvanceBank>* out) const;

 private:
  std::vector<int> pending_;  // constraint indices, in Hugging Face's order
  int complete_ = 0;          // constraints met
  int in_progress_ = -1;      // the constraint in progress, -1 for none
  int node_ = -1;             // its trie node: the tokens matched so far
  bool completed_ = false;
};

// One step's candidates for step_sentence_constraint: first the top-k ones that process() kept
// (in rank order), then the advance ones; and which of them become the next beams.
class ConstrainedCandidates {
 public:
  struct Candidate {
    float score;  // the sum of log-probabilities with this token
    int beam;     // the parent
    int token;
    int bank;  // ConstraintListState.get_bank() of the result
  };

  void Reserve(int n);
  void Clear() { all_.clear(); }
  void Add(const Candidate& c) { all_.push_back(c); }
  int size() const { return static_cast<int>(all_.size()); }
  const Candidate& operator[](int i) const { return all_[i]; }

  // The candidates kept, best first, at most `beams`: with no advance candidate (size() ==
  // top_k) the top-k ones as they are; else sorted by bank * 100 + score, descending (as
  // torch.sort), then taken round robin over the runs of equal banks (the first of each run,
  // then the second of each, ...: numpy's stable argsort of the positions within the runs).
  const std::vector<int>& Select(int top_k, int beams);

 private:
  std::vector<Candidate> all_;
  std::vector<std::pair<float, int>> zipped_;
  std::vector<int> increments_, order_;
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_DECODE_CONSTRAINTS_H_
