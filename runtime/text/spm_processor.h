// A std-only face of SentencePiece. Its header declares its own absl::string_view, which clashes
// with real Abseil, so only spm_processor.cc includes it, and that file includes no Abseil header.
#ifndef GLOSSA_RUNTIME_TEXT_SPM_PROCESSOR_H_
#define GLOSSA_RUNTIME_TEXT_SPM_PROCESSOR_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace glossa {

class SpmProcessor {
 public:
  // Loads a serialized SentencePiece model; on failure returns nullptr and sets *error.
  static std::unique_ptr<SpmProcessor> Load(const std::string& serialized, std::string* error);
  ~SpmProcessor();

  // Pieces of a text (SentencePiece's normalisation applied). Empty on an encoding error.
  std::vector<std::string> Encode(std::string_view text) const;
  // Text of a piece sequence, as SentencePiece's DecodePieces.
  std::string Decode(const std::vector<std::string>& pieces) const;

 private:
  SpmProcessor();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> impl_;
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_TEXT_SPM_PROCESSOR_H_
