// Fuzzes the model file loader: ModelFile::Open (preamble, version, header checksum, JSON header,
// tensor index: dtypes, shapes, sizes, offsets, bounds, tensor checksums), then ParseModelInfo on
// the header and Tokenizer::Load (the vocabulary and both SentencePiece models) when it opens;
// and when the whole model loads (Model::Load: every weight's shape checked), translates two
// short sentences greedily and with a beam of 2, so that header values the decoder indexes with
// (special ids, forced EOS, banned ids, lengths) are exercised, not only parsed.
//
// The input is a whole model file. Open() maps a path, so the bytes go into a memfd opened as
// /proc/self/fd/N. A mutated header rarely keeps its crc32, so each input is opened three ways:
// as given (checksums verified), with the header crc32 fixed up (verified), and fixed up without
// tensor checksums; the last two reach the JSON and the tensor index. Seeds: corpus/model_file
// (tests/fuzz/make_seeds.py writes them).
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/model.h"
#include "engine/translator.h"
#include "fuzz_util.h"
#include "model/config.h"
#include "model/model_file.h"
#include "text/tokenizer.h"

// SentencePiece's own switch (util.cc in its static library), declared here because its header
// cannot meet Abseil: without it, every model with an empty charsmap logs a line at INFO.
namespace sentencepiece::logging {
void SetMinLogLevel(int v);
}

namespace {

constexpr size_t kPreamble = 24;

// GLOSSA_FUZZ_VERBOSE=1: say how far each input got (to check that the seeds reach the end).
void Log(const char* stage, const absl::Status& status) {
  static const bool verbose = std::getenv("GLOSSA_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "  %s: %s\n", stage, status.ToString().c_str());
}

struct Scratch {
  int fd = -1;
  std::string path;
};

const Scratch& GetScratch() {
  static const Scratch scratch = [] {
    sentencepiece::logging::SetMinLogLevel(1);  // warnings and errors only
    Scratch s;
    s.fd = memfd_create("glossa-fuzz-model", 0);
    FUZZ_CHECK(s.fd >= 0, "memfd_create failed");
    s.path = "/proc/self/fd/" + std::to_string(s.fd);
    return s;
  }();
  return scratch;
}

void WriteScratch(const std::string& bytes) {
  const Scratch& s = GetScratch();
  FUZZ_CHECK(ftruncate(s.fd, 0) == 0, "ftruncate failed");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = pwrite(s.fd, bytes.data() + done, bytes.size() - done, done);
    FUZZ_CHECK(n > 0, "pwrite failed");
    done += static_cast<size_t>(n);
  }
}

// What every successfully opened file must satisfy, whatever its bytes.
void CheckOpened(const glossa::ModelFile& file, size_t file_size) {
  FUZZ_CHECK(file.size_bytes() == file_size, "size_bytes differs from the file's size");
  FUZZ_CHECK(file.header().is_object(), "header is not an object");
  const uint8_t* base = nullptr;
  for (const auto& entry : file.header().at("tensors")) {
    const std::string name = entry.at("name").get<std::string>();
    const uint64_t offset = entry.at("offset").get<uint64_t>();
    auto t = file.Tensor(name);
    FUZZ_CHECK(t.ok(), "a listed tensor is not found");
    const glossa::TensorView& view = **t;
    FUZZ_CHECK(offset <= file_size && view.size_bytes <= file_size - offset,
               "a tensor extends past the end of the file");
    const uint8_t* data = static_cast<const uint8_t*>(view.data);
    if (base == nullptr) base = data - offset;
    FUZZ_CHECK(data - offset == base, "tensors do not share one mapping");
    if (view.size_bytes > 0) {
      // Past the mapping these loads fault; the bounds check above says they cannot.
      volatile uint8_t first = data[0], last = data[view.size_bytes - 1];
      (void)first;
      (void)last;
    }
    FUZZ_CHECK(view.NumElements() >= 0, "negative element count");
    auto bytes = file.Bytes(name);
    FUZZ_CHECK(bytes.ok() && bytes->size() == view.size_bytes, "Bytes() has the wrong size");
    // FloatTensor with the tensor's own shape: OK exactly when it is a float32 tensor.
    auto f32 = file.FloatTensor(name, view.shape);
    FUZZ_CHECK(f32.ok() == (view.dtype == glossa::DType::kFloat32),
               "FloatTensor disagrees on dtype");
  }
  FUZZ_CHECK(!file.Tensor("\x01no such tensor").ok(), "a missing tensor was found");

  auto info = glossa::ParseModelInfo(file.header());
  Log("ParseModelInfo", info.status());
  if (!info.ok()) return;
  const glossa::ModelConfig& c = info->config;
  FUZZ_CHECK(c.d_model > 0 && c.encoder_heads > 0 && c.decoder_heads > 0 &&
                 c.d_model % c.encoder_heads == 0 && c.d_model % c.decoder_heads == 0,
             "ParseModelInfo accepted bad sizes");
  FUZZ_CHECK(c.eos_id >= 0 && c.eos_id < c.target_vocab_size && c.pad_id >= 0 &&
                 c.pad_id < c.target_vocab_size && c.unk_id >= 0 && c.unk_id < c.source_vocab_size,
             "ParseModelInfo accepted special ids outside the vocabulary");
  const glossa::GenerationDefaults& g = info->generation;
  FUZZ_CHECK(g.num_beams >= 1 && g.max_length >= 2 && std::fabs(g.length_penalty) <= 10.0f,
             "ParseModelInfo returned bad generation defaults");
  FUZZ_CHECK(g.forced_eos_id >= -1 && g.forced_eos_id < c.target_vocab_size,
             "ParseModelInfo accepted a forced EOS id outside the vocabulary");
  for (int id : c.banned_ids) {
    FUZZ_CHECK(id >= 0 && id < c.target_vocab_size, "ParseModelInfo accepted a banned id outside");
  }

  auto tokenizer = glossa::Tokenizer::Load(file, c);
  Log("Tokenizer::Load", tokenizer.status());
  if (!tokenizer.ok()) return;
  for (const char* text : {"Hola", "En el principio creó Dios los cielos y la tierra.", " \t\n"}) {
    auto ids = (*tokenizer)->EncodeSource(text);
    FUZZ_CHECK(ids.ok() && !ids->empty() && ids->back() == c.eos_id, "EncodeSource failed");
    for (int id : *ids) {
      FUZZ_CHECK(id >= 0 && id < c.source_vocab_size,
                 "EncodeSource gave an id outside the vocabulary");
    }
    (void)(*tokenizer)->DecodeTarget(*ids);
  }
}

void OpenAndCheck(const std::string& bytes, bool verify_checksums) {
  WriteScratch(bytes);
  auto file = glossa::ModelFile::Open(GetScratch().path, verify_checksums);
  Log(verify_checksums ? "Open" : "Open without tensor checksums", file.status());
  if (file.ok()) {
    FUZZ_CHECK(bytes.size() >= kPreamble, "a file shorter than the preamble opened");
    CheckOpened(**file, bytes.size());
  } else {
    FUZZ_CHECK(!file.status().message().empty(), "an error without a message");
  }
}

// A model that loads must translate: two sentences, greedy and beam 2, at most 4 tokens each.
void LoadAndTranslate() {
  auto model = glossa::Model::Load(GetScratch().path);
  Log("Model::Load", model.status());
  if (!model.ok()) return;
  glossa::TranslatorOptions options;
  options.max_batch_size = 2;
  options.kv_cache_bytes = int64_t{64} << 20;
  glossa::Translator translator(*model, options);
  for (int beam : {1, 2}) {
    glossa::TranslateOptions t;
    t.beam_size = beam;
    t.max_output_tokens = 4;
    auto result = translator.Translate({"Hola", "En el principio."}, t);
    Log(beam == 1 ? "Translate (greedy)" : "Translate (beam 2)", result.status());
    if (!result.ok()) continue;  // e.g. max_output_tokens above a tiny model's max_length
    FUZZ_CHECK(result->size() == 2, "Translate returned the wrong number of translations");
    for (const auto& translation : *result) {
      for (const auto& h : translation.hypotheses) {
        FUZZ_CHECK(h.token_ids.size() <= 4, "a hypothesis is longer than max_output_tokens");
        for (int id : h.token_ids) {
          FUZZ_CHECK(id >= 0 && id < (*model)->config().target_vocab_size,
                     "a generated id is outside the target vocabulary");
        }
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  OpenAndCheck(bytes, /*verify_checksums=*/true);
  if (size < kPreamble) return 0;
  uint64_t header_size;
  std::memcpy(&header_size, data + 16, sizeof(header_size));
  if (header_size > size - kPreamble) return 0;
  const uint32_t crc =
      static_cast<uint32_t>(crc32(0L, data + kPreamble, static_cast<uInt>(header_size)));
  if (std::memcmp(data + 12, &crc, sizeof(crc)) != 0) {
    std::memcpy(bytes.data() + 12, &crc, sizeof(crc));
    OpenAndCheck(bytes, /*verify_checksums=*/true);
  }
  OpenAndCheck(bytes, /*verify_checksums=*/false);
  LoadAndTranslate();  // the scratch file now holds the bytes with the header crc fixed up
  return 0;
}
