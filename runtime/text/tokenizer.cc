#include "text/tokenizer.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "util/status_macros.h"

namespace glossa {
namespace {

absl::StatusOr<std::vector<std::string>> ReadVocab(const nlohmann::json& tokenizer,
                                                   const char* key, int size) {
  if (!tokenizer.contains(key) || !tokenizer[key].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat("model header: tokenizer.", key, " is missing"));
  }
  auto vocab = tokenizer[key].get<std::vector<std::string>>();
  if (static_cast<int>(vocab.size()) != size) {
    return absl::InvalidArgumentError(absl::StrCat("model header: tokenizer.", key, " has ",
                                                   vocab.size(), " pieces, the config says ", size));
  }
  return vocab;
}

absl::StatusOr<std::shared_ptr<const SpmProcessor>> LoadSpm(const ModelFile& file,
                                                            const char* key,
                                                            const std::string& bytes) {
  std::string error;
  auto spm = SpmProcessor::Load(bytes, &error);
  if (spm == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("model file '", file.path(), "': bad SentencePiece model ", key, ": ", error));
  }
  return std::shared_ptr<const SpmProcessor>(std::move(spm));
}

std::shared_ptr<const absl::flat_hash_map<std::string, int>> IdsOf(
    const std::vector<std::string>& vocab) {
  auto ids = std::make_shared<absl::flat_hash_map<std::string, int>>();
  ids->reserve(vocab.size());
  for (int i = 0; i < static_cast<int>(vocab.size()); ++i) ids->emplace(vocab[i], i);
  return ids;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const ModelFile& file,
                                                           const ModelConfig& config) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  static const nlohmann::json kNone = nlohmann::json::object();
  const auto found = file.header().find("tokenizer");
  const nlohmann::json& tokenizer = found != file.header().end() ? *found : kNone;
  try {
    GLOSSA_ASSIGN_OR_RETURN(const std::string source_bytes,
                            file.Bytes(tokenizer.value("source_spm", "")));
    GLOSSA_ASSIGN_OR_RETURN(const std::string target_bytes,
                            file.Bytes(tokenizer.value("target_spm", "")));
    GLOSSA_ASSIGN_OR_RETURN(t->source_spm_, LoadSpm(file, "source_spm", source_bytes));
    if (target_bytes == source_bytes) {
      t->target_spm_ = t->source_spm_;
    } else {
      GLOSSA_ASSIGN_OR_RETURN(t->target_spm_,
                              LoadSpm(file, "target_spm", target_bytes));
    }
    GLOSSA_ASSIGN_OR_RETURN(std::vector<std::string> source,
                            ReadVocab(tokenizer, "source_vocab", config.source_vocab_size));
    t->source_ids_ = IdsOf(source);
    if (config.shared_vocab) {
      t->target_vocab_ = std::move(source);
      t->target_ids_ = t->source_ids_;
    } else {
      GLOSSA_ASSIGN_OR_RETURN(t->target_vocab_,
                              ReadVocab(tokenizer, "target_vocab", config.target_vocab_size));
      t->target_ids_ = IdsOf(t->target_vocab_);
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("model header: bad tokenizer entry: ", e.what()));
  }
  t->unk_id_ = config.unk_id;
  t->eos_id_ = config.eos_id;
  t->special_target_.assign(t->target_vocab_.size(), false);
  std::vector<int> special = {config.pad_id, config.eos_id, config.unk_id};
  try {
    for (const auto& id : tokenizer.value("special_ids", nlohmann::json::array())) {
      special.push_back(id.get<int>());
    }
    t->language_after_eos_ = tokenizer.value("source_language_position", "prefix") == "suffix";
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("model header: bad tokenizer entry: ", e.what()));
  }
  for (int id : special) {
    if (id >= 0 && id < static_cast<int>(t->target_vocab_.size())) t->special_target_[id] = true;
  }
  if (config.architecture == "marian") {
    // MarianTokenizer keeps a leading ">>xxx<<" whole: multi-target models choose the target
    // language with it.
    for (const auto& [piece, id] : *t->source_ids_) {
      if (piece.size() > 4 && absl::StartsWith(piece, ">>") && absl::EndsWith(piece, "<<")) {
        t->target_prefix_tokens_.push_back(piece);
      }
    }
    std::sort(t->target_prefix_tokens_.begin(), t->target_prefix_tokens_.end());
  }
  return t;
}

int Tokenizer::SourceId(const std::string& piece) const {
  auto it = source_ids_->find(piece);
  return it == source_ids_->end() ? -1 : it->second;
}

absl::StatusOr<std::vector<int>> Tokenizer::EncodeSource(absl::string_view text,
                                                         int language_id) const {
  if (!IsValidUtf8(text)) {
    return absl::InvalidArgumentError("text is not valid UTF-8: send UTF-8 encoded text");
  }
  std::vector<int> ids;
  if (language_id >= 0 && !language_after_eos_) ids.push_back(language_id);
  for (const std::string& piece : source_spm_->Encode(std::string_view(text.data(), text.size()))) {
    auto it = source_ids_->find(piece);
    ids.push_back(it == source_ids_->end() ? unk_id_ : it->second);
  }
  ids.push_back(eos_id_);
  if (language_id >= 0 && language_after_eos_) ids.push_back(language_id);
  return ids;
}

absl::StatusOr<std::vector<int>> Tokenizer::EncodeTarget(absl::string_view text) const {
  if (!IsValidUtf8(text)) {
    return absl::InvalidArgumentError("text is not valid UTF-8: send UTF-8 encoded text");
  }
  std::vector<int> ids;
  for (const std::string& piece : target_spm_->Encode(std::string_view(text.data(), text.size()))) {
    auto it = target_ids_->find(piece);
    ids.push_back(it == target_ids_->end() ? unk_id_ : it->second);
  }
  return ids;
}

std::string Tokenizer::DecodeTarget(const std::vector<int>& ids) const {
  std::vector<std::string> pieces;
  pieces.reserve(ids.size());
  for (int id : ids) {
    if (id < 0 || id >= static_cast<int>(target_vocab_.size()) || special_target_[id]) continue;
    pieces.push_back(target_vocab_[id]);
  }
  std::string text = target_spm_->Decode(pieces);
  absl::StrReplaceAll({{"\xE2\x96\x81", " "}}, &text);  // U+2581, as MarianTokenizer does
  return std::string(absl::StripAsciiWhitespace(text));
}

namespace {

constexpr absl::string_view kWordStart = "\xE2\x96\x81";  // U+2581, SentencePiece's space

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// A piece of ASCII punctuation only (after SentencePiece's space): not part of a word's meaning.
bool IsPunctuationPiece(absl::string_view piece) {
  absl::ConsumePrefix(&piece, kWordStart);
  if (piece.empty()) return false;
  for (char c : piece) {
    if (!absl::ascii_ispunct(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

int CountWords(absl::string_view text) {
  int words = 0;
  bool in_word = false;
  for (char c : text) {
    if (IsAsciiSpace(c)) {
      in_word = false;
    } else if (!in_word) {
      in_word = true;
      ++words;
    }
  }
  return words;
}

}  // namespace

std::vector<int> Tokenizer::SourceWords(absl::string_view text, int language_id) const {
  if (!IsValidUtf8(text)) return {};
  std::vector<int> words;
  if (language_id >= 0 && !language_after_eos_) words.push_back(-1);
  int word = -1;
  for (const std::string& piece : source_spm_->Encode(std::string_view(text.data(), text.size()))) {
    if (absl::StartsWith(piece, kWordStart) || word < 0) ++word;
    words.push_back(IsPunctuationPiece(piece) ? -1 : word);
  }
  if (word + 1 != CountWords(text)) return {};
  words.push_back(-1);  // </s>
  if (language_id >= 0 && language_after_eos_) words.push_back(-1);
  return words;
}

std::vector<std::pair<size_t, size_t>> Tokenizer::TargetOffsets(const std::vector<int>& ids) const {
  std::string joined;
  std::vector<std::pair<size_t, size_t>> raw;
  for (int id : ids) {
    if (id < 0 || id >= static_cast<int>(target_vocab_.size()) || special_target_[id]) {
      raw.emplace_back(joined.size(), joined.size());
      continue;
    }
    const size_t begin = joined.size();
    joined += absl::StrReplaceAll(target_vocab_[id], {{kWordStart, " "}});
    raw.emplace_back(begin, joined.size());
  }
  // DecodeTarget strips the text: offsets move back by the leading blanks and stop at its end.
  const std::string text = DecodeTarget(ids);
  const size_t lead = std::min(joined.find_first_not_of(' '), joined.size());
  if (joined.compare(lead, text.size(), text) != 0) return {};
  for (auto& [begin, end] : raw) {
    begin = std::min(std::max(begin, lead) - lead, text.size());
    end = std::min(std::max(end, lead) - lead, text.size());
  }
  return raw;
}

bool IsValidUtf8(absl::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    int len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

}  // namespace glossa
