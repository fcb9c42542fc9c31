// No Abseil header here: see spm_processor.h.
#include "text/spm_processor.h"

#include <sentencepiece_processor.h>

#include <exception>

namespace glossa {

SpmProcessor::SpmProcessor() : impl_(new sentencepiece::SentencePieceProcessor()) {}
SpmProcessor::~SpmProcessor() = default;

std::unique_ptr<SpmProcessor> SpmProcessor::Load(const std::string& serialized,
                                                 std::string* error) {
  std::unique_ptr<SpmProcessor> p(new SpmProcessor());
  // SentencePiece reports most problems in its status, but its trie builder (darts-clone) throws,
  // e.g. on an empty piece (found by fuzzing); uncaught, that ended the process.
  try {
    const auto status = p->impl_->LoadFromSerializedProto(serialized);
    if (!status.ok()) {
      *error = status.ToString();
      return nullptr;
    }
  } catch (const std::exception& e) {
    *error = std::string("the model cannot be loaded: ") + e.what();
    return nullptr;
  }
  return p;
}

std::vector<std::string> SpmProcessor::Encode(std::string_view text) const {
  std::vector<std::string> pieces;
  if (!impl_->Encode(absl::string_view(text.data(), text.size()), &pieces).ok()) {
    pieces.clear();
  }
  return pieces;
}

std::string SpmProcessor::Decode(const std::vector<std::string>& pieces) const {
  std::string text;
  if (!impl_->Decode(pieces, &text).ok()) text.clear();
  return text;
}

}  // namespace glossa
