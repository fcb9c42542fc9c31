// Fuzzes the text path of the demo model (models/opus-mt-es-en-bible.glossa): arbitrary bytes
// through Tokenizer::EncodeSource (our UTF-8 check, SentencePiece's normalisation and
// segmentation, the vocabulary lookup), and the same bytes read as little-endian int16 ids (in
// and out of the vocabulary, negative too) through DecodeTarget. Checks: EncodeSource accepts
// exactly the well-formed UTF-8 (compared with a reference validator), its ids lie in the source
// vocabulary and end with </s>; DecodeTarget gives well-formed UTF-8 (the server puts it in a
// proto string) without line-end padding.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "model/config.h"
#include "model/model_file.h"
#include "text/tokenizer.h"

namespace {

struct Demo {
  std::unique_ptr<glossa::ModelFile> file;
  glossa::ModelConfig config;
  std::unique_ptr<glossa::Tokenizer> tokenizer;
};

const Demo& GetDemo() {
  static const Demo* demo = [] {
    auto* d = new Demo();
    auto file = glossa::ModelFile::Open(GLOSSA_DEMO_MODEL, /*verify_checksums=*/false);
    FUZZ_CHECK(file.ok(), "cannot open the demo model");
    d->file = *std::move(file);
    auto info = glossa::ParseModelInfo(d->file->header());
    FUZZ_CHECK(info.ok(), "cannot read the demo model's config");
    d->config = info->config;
    auto tokenizer = glossa::Tokenizer::Load(*d->file, d->config);
    FUZZ_CHECK(tokenizer.ok(), "cannot load the demo model's tokenizer");
    d->tokenizer = *std::move(tokenizer);
    return d;
  }();
  return *demo;
}

void CheckDecoded(const std::string& text) {
  FUZZ_CHECK(glossa::fuzz::ReferenceUtf8Valid(text), "DecodeTarget gave invalid UTF-8");
  FUZZ_CHECK(glossa::IsValidUtf8(text), "IsValidUtf8 rejects DecodeTarget's output");
  if (!text.empty()) {
    auto space = [](char c) { return c != 0 && std::strchr(" \t\n\v\f\r", c) != nullptr; };
    FUZZ_CHECK(!space(text.front()) && !space(text.back()), "DecodeTarget's text is not stripped");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Demo& demo = GetDemo();
  const glossa::Tokenizer& tokenizer = *demo.tokenizer;
  const std::string text(reinterpret_cast<const char*>(data), size);

  const bool valid = glossa::fuzz::ReferenceUtf8Valid(text);
  FUZZ_CHECK(glossa::IsValidUtf8(text) == valid, "IsValidUtf8 disagrees with the reference");
  auto ids = tokenizer.EncodeSource(text);
  FUZZ_CHECK(ids.ok() == valid, "EncodeSource accepts invalid or rejects valid UTF-8");
  if (ids.ok()) {
    FUZZ_CHECK(!ids->empty() && ids->back() == demo.config.eos_id,
               "source ids do not end with </s>");
    for (int id : *ids) {
      FUZZ_CHECK(id >= 0 && id < demo.config.source_vocab_size,
                 "a source id outside the vocabulary");
    }
    // The vocabulary is shared: the source ids decode as target ids too.
    CheckDecoded(tokenizer.DecodeTarget(*ids));
  }

  std::vector<int> target;
  for (size_t i = 0; i + 1 < size; i += 2) {
    int16_t id;
    std::memcpy(&id, data + i, sizeof(id));
    // The ends of the int16 range stand for the ends of int's.
    target.push_back(id == INT16_MIN ? INT32_MIN : id == INT16_MAX ? INT32_MAX : id);
  }
  CheckDecoded(tokenizer.DecodeTarget(target));
  return 0;
}
