// The encoder's self-attention over one source sentence: every query row against every key row.
//
// AttendRow (layers/attention.h) serves one query at a time: each score is a dot product of 64
// floats summed across the lanes of a vector, and each key and value row is read again for every
// query. In the encoder all `len` queries of a sentence share its keys and values, so with heads
// of 64 on AVX-512 AttendSentence works per head on blocks of 4 queries against 16-key blocks of
// that head's keys transposed (64 x len, written once per head): a score block is 64 multiply-adds
// of a broadcast query value by a row of 16 keys, with no sum across lanes, and each value row is
// read once per 4 queries. The softmax is ops::Softmax's. The scores' additions run in another
// order than AttendRow's (the last bits differ); otherwise, and on other CPUs, AttendSentence is
// AttendRow for each query.
#ifndef GLOSSA_RUNTIME_LAYERS_SENTENCE_ATTENTION_H_
#define GLOSSA_RUNTIME_LAYERS_SENTENCE_ATTENTION_H_

#include <cstdint>
#include <vector>

namespace glossa {

// out[t] = Σ_j softmax_j(q[t] · k[j]) v[j] per head, for t, j < len. q, k, v and out are rows of
// d = heads * head_dim floats, `stride` floats apart (q already multiplied by head_dim^-0.5).
// scratch grows as needed and may be reused across calls.
void AttendSentence(const float* q, const float* k, const float* v, int len, int heads,
                    int head_dim, int64_t stride, std::vector<float>& scratch, float* out);

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_LAYERS_SENTENCE_ATTENTION_H_
