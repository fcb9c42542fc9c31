// A loaded model: its file, config, typed weights, encoder, decoder and tokenizer. Immutable
// after Load, so any number of threads may translate with it at once. The file is mapped while
// it loads, then read only where weights stay in it (ModelFile::CopyOut): a file overwritten in
// place after the load is noticed there (file().changed()), and the engine then refuses to
// translate with the model (DATA_LOSS) rather than read the new bytes.
#ifndef GLOSSA_RUNTIME_ENGINE_MODEL_H_
#define GLOSSA_RUNTIME_ENGINE_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "layers/decoder.h"
#include "layers/encoder.h"
#include "model/config.h"
#include "model/model_file.h"
#include "model/weights.h"
#include "text/tokenizer.h"

namespace glossa {

struct ModelOptions {
  // "float32", "bfloat16", "int8" or "int8_fast"; empty: as the file stores its weights (its
  // "dtype", with the output projection in whatever type it is stored).
  std::string compute_type;
  // Keep the output projection (lm_head) in float32 even when compute_type is lower.
  bool float32_output_layer = false;
  // Screen the float32 output projection for greedy steps that want no score
  // (ops/argmax_screen.h): faster in steps of up to 64 rows, one more byte per output weight in
  // memory once a greedy request without scores first comes.
  bool argmax_screen = true;
  // Threads a load may use for its checksums and its copies into oneDNN's layouts (0: the
  // calling thread's OpenMP team for the copies, a checksum thread per core up to 8). A server
  // loading models beside traffic leaves a core to the models already serving.
  int load_threads = 0;
};

// --help texts of the binaries' --compute_type and --float32_output_layer flags.
inline constexpr char kComputeTypeFlagHelp[] =
    "Compute type of the Linear layers: float32, bfloat16 (AVX512-BF16), int8 (VNNI; s8 weights "
    "per output row; each input value carried as two u8 codes, about 16 bits) or int8_fast (one "
    "u8 code per input value: faster in large batches, identical to float32 less often); empty: "
    "as the model file stores its weights";
inline constexpr char kFloat32OutputLayerFlagHelp[] =
    "Keep the output projection in float32 when --compute_type is bfloat16, int8 or int8_fast";

inline constexpr char kArgmaxScreenFlagHelp[] =
    "Greedy decoding without scores finds each step's most likely token from an int8 copy of "
    "the float32 output projection plus the float32 logits of the few tokens it cannot rule out: "
    "the same tokens, faster in steps of up to 64 sentences (CPUs with AVX-512 VNNI); the copy, "
    "one byte per output-layer weight (OPUS-MT big: 60 MB, NLLB-600M: 253 MB), is made by the "
    "first such request. With it, the float32 output layer stays in the model file until "
    "a request needs every logit (beam search, scores), which then starts copying it into the "
    "layout of the matrix products, once, on a thread of its own (NLLB-600M: 1 GB); a server "
    "that only decodes greedy without scores never holds that copy";

class Model {
 public:
  static absl::StatusOr<std::shared_ptr<const Model>> Load(const std::string& path,
                                                           const ModelOptions& options = {});

  // info().dtype is the compute type in use (which may differ from the file's storage type).
  const ModelInfo& info() const { return info_; }
  const ModelConfig& config() const { return info_.config; }
  const Encoder& encoder() const { return *encoder_; }
  const Decoder& decoder() const { return *decoder_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ModelWeights& weights() const { return *weights_; }
  const ModelFile& file() const { return *file_; }

 private:
  Model() = default;
  std::unique_ptr<ModelFile> file_;
  ModelInfo info_;
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Encoder> encoder_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_ENGINE_MODEL_H_
