// Tokenization as Hugging Face's MarianTokenizer, M2M100Tokenizer, NllbTokenizer and
// MBart50Tokenizer do it: the source SentencePiece model splits text into pieces, the vocabulary
// maps pieces to ids (unknown pieces -> <unk>), and </s> ends the source; a language token goes
// before the text (M2M100, NLLB, mBART-50, and Marian multi-target's ">>fra<<") or after the </s>
// (NLLB with legacy_behaviour). Target ids map back to pieces, special ids (pad, eos, unk and,
// from the model file, bos, mask and the language tokens) are skipped, the target SentencePiece
// model joins the pieces, and the text is stripped.
#ifndef GLOSSA_RUNTIME_TEXT_TOKENIZER_H_
#define GLOSSA_RUNTIME_TEXT_TOKENIZER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/config.h"
#include "model/model_file.h"
#include "text/spm_processor.h"

namespace glossa {

class Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const ModelFile& file,
                                                         const ModelConfig& config);

  // Source ids ending with </s>, with the language token `language_id` (>= 0) in its place.
  // INVALID_ARGUMENT for text that is not valid UTF-8.
  absl::StatusOr<std::vector<int>> EncodeSource(absl::string_view text,
                                                int language_id = -1) const;
  // The id of a source piece, -1 when the vocabulary has no such piece.
  int SourceId(const std::string& piece) const;
  // Marian multi-target models: the target language tokens (">>fra<<") of the vocabulary.
  const std::vector<std::string>& target_prefix_tokens() const { return target_prefix_tokens_; }
  // Target ids of target-language text, without </s> (a target prefix), as MarianTokenizer's
  // text_target encoding with add_special_tokens=False. INVALID_ARGUMENT when not UTF-8.
  absl::StatusOr<std::vector<int>> EncodeTarget(absl::string_view text) const;
  // The text of target ids; special ids are skipped.
  std::string DecodeTarget(const std::vector<int>& ids) const;
  // For each id EncodeSource(text, language_id) gives, the index of the word of `text` it is
  // part of (words: runs of characters between ASCII whitespace); -1 for </s>, the language
  // token and pieces of ASCII punctuation only. Empty when the pieces do not start anew at each word (normalisation joined or split
  // words), or the text is not UTF-8.
  std::vector<int> SourceWords(absl::string_view text, int language_id = -1) const;
  // The byte range of each id's piece in DecodeTarget(ids) ([0, 0) for special ids, without
  // a leading space); empty when that text is not the pieces put together (byte pieces, <unk>).
  std::vector<std::pair<size_t, size_t>> TargetOffsets(const std::vector<int>& ids) const;
  // The text of one target id as it would appear inside a decoded sentence ("▁" as a space).
  const std::string& TargetPiece(int id) const { return target_vocab_[id]; }

 private:
  Tokenizer() = default;
  // The target's are the source's when the model file holds one SentencePiece model (one tensor
  // under both names, or equal bytes) or one vocabulary: loading a 256k-piece model takes ~0.3 s.
  std::shared_ptr<const SpmProcessor> source_spm_, target_spm_;
  std::shared_ptr<const absl::flat_hash_map<std::string, int>> source_ids_, target_ids_;
  std::vector<std::string> target_vocab_;
  std::vector<bool> special_target_;
  std::vector<std::string> target_prefix_tokens_;
  bool language_after_eos_ = false;  // NLLB legacy_behaviour
  int unk_id_ = 0;
  int eos_id_ = 0;
};

// True when `text` is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool IsValidUtf8(absl::string_view text);

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_TEXT_TOKENIZER_H_
