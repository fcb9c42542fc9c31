#include "model/checksums.h"

#include <isa-l/crc.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>

namespace glossa {
namespace {

constexpr uint64_t kPieceBytes = uint64_t{16} << 20;

struct Piece {
  size_t range;
  uint64_t begin;
  uint64_t size;
  uint32_t crc;
};

}  // namespace

uint32_t Crc32(const uint8_t* data, uint64_t size) {
  // ISA-L's carry-less-multiply CRC: zlib's polynomial and results, ~4x zlib's speed here.
  return crc32_gzip_refl(0, data, size);
}

std::vector<uint32_t> Crc32Ranges(const std::vector<ByteRange>& ranges, int threads,
                                  const std::function<void(ByteRange)>& piece_done) {
  std::vector<Piece> pieces;
  uint64_t total = 0;
  for (size_t r = 0; r < ranges.size(); ++r) {
    total += ranges[r].size;
    for (uint64_t begin = 0; begin < ranges[r].size; begin += kPieceBytes) {
      pieces.push_back({r, begin, std::min(kPieceBytes, ranges[r].size - begin), 0});
    }
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < pieces.size();) {
      Piece& p = pieces[i];
      const ByteRange bytes{ranges[p.range].data + p.begin, p.size};
      p.crc = Crc32(bytes.data, bytes.size);
      if (piece_done) piece_done(bytes);
    }
  };
  std::vector<std::thread> others;
  // A thread per 16 MiB at most: a small file is summed before a thread would have started.
  const size_t wanted = std::min<size_t>({static_cast<size_t>(std::max(threads, 1)),
                                          pieces.size(), total / kPieceBytes + 1});
  for (size_t t = 1; t < wanted; ++t) {
    try {
      others.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // fewer threads: the pieces are shared out all the same
    }
  }
  work();
  for (std::thread& t : others) t.join();
  std::vector<uint32_t> crcs(ranges.size(), static_cast<uint32_t>(crc32(0L, Z_NULL, 0)));
  for (const Piece& p : pieces) {  // in order within each range
    crcs[p.range] = static_cast<uint32_t>(
        crc32_combine(crcs[p.range], p.crc, static_cast<z_off_t>(p.size)));
  }
  return crcs;
}

}  // namespace glossa
