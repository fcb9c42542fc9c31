// zlib's crc32 (computed with ISA-L) of many byte ranges at once, on several threads: verifying
// every tensor of a 2.4 GB model file with zlib on one thread took ~0.8-1.5 s of its load.
#ifndef GLOSSA_RUNTIME_MODEL_CHECKSUMS_H_
#define GLOSSA_RUNTIME_MODEL_CHECKSUMS_H_

#include <cstdint>
#include <functional>
#include <vector>

namespace glossa {

struct ByteRange {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
};

// crc32 (zlib's polynomial and conventions) of a contiguous range, on the calling thread.
uint32_t Crc32(const uint8_t* data, uint64_t size);

// The crc32 of each range, in order. Ranges are cut into pieces of at most 16 MiB, summed by up
// to `threads` threads (the caller's included) and combined; `piece_done` (may be empty) is
// called with each piece once it is summed, on the thread that summed it.
std::vector<uint32_t> Crc32Ranges(const std::vector<ByteRange>& ranges, int threads,
                                  const std::function<void(ByteRange)>& piece_done);

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_MODEL_CHECKSUMS_H_
