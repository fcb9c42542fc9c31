#include "common/test_util.h"

#include "layers/decoder.h"
#include "layers/kv_cache.h"

namespace glossa::testing {

std::vector<std::vector<float>> TeacherForcedLogits(
    const Model& model, const std::vector<int>& source, const std::vector<int>& prefix,
    const std::function<void(EncodedBatch&)>& after_cross_kv,
    std::vector<std::vector<float>>* cross_attention) {
  const ModelConfig& c = model.config();
  auto batch = model.encoder().Encode({source});
  model.decoder().PrecomputeCrossKv(*batch);
  if (after_cross_kv) after_cross_kv(*batch);
  KvBlockPool pool(KvCache::BlockFloats(c.decoder_layers, c.d_model), 1 << 16);
  KvCache cache(&pool, c.decoder_layers, c.d_model, 1);
  DecoderScratch scratch;
  std::vector<int> ancestry;
  std::vector<std::vector<float>> out;
  for (size_t t = 0; t < prefix.size(); ++t) {
    EXPECT_TRUE(cache.Reserve(static_cast<int>(t) + 1).ok());
    ancestry.push_back(0);
    DecoderRow row;
    row.token = prefix[t];
    row.position = static_cast<int>(t);
    row.cache = &cache;
    row.slot = 0;
    row.ancestry = ancestry.data();
    row.source_batch = batch.get();
    row.source = 0;
    std::vector<float> logits(c.target_vocab_size);
    if (cross_attention != nullptr) {
      row.cross_attention = cross_attention->emplace_back(c.decoder_layers * source.size()).data();
    }
    model.decoder().Step({row}, scratch, logits.data());
    out.push_back(std::move(logits));
  }
  return out;
}

}  // namespace glossa::testing
