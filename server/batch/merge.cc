#include "server/batch/merge.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/batch/batch_job.h"
#include "server/batch/io/journal.h"
#include "server/batch/io/log.h"

namespace glossa::batch {
namespace {

struct ShardOutput {
  std::string path;
  JournalState journal;
  int index = 0;
  int count = 0;
  int64_t first_line = 0;
  int64_t end_line = 0;
};

// The job without what differs between its shards.
nlohmann::json CommonPart(nlohmann::json job) {
  job.erase("shard");
  job.erase("lines");
  return job;
}

absl::StatusOr<ShardOutput> ReadShard(const std::string& path) {
  absl::StatusOr<JournalState> journal = ReadJournal(JournalPath(path));
  if (!journal.ok()) return journal.status();
  ShardOutput shard{path, *std::move(journal)};
  if (!shard.journal.complete) {
    return absl::FailedPreconditionError(
        absl::StrCat(path,
                     " is not complete (its journal has no \"complete\" record): finish it "
                     "with glossa-batch --resume first"));
  }
  try {
    const nlohmann::json& job = shard.journal.job;
    shard.index = job.at("shard").at(0).get<int>();
    shard.count = job.at("shard").at(1).get<int>();
    shard.first_line = job.at("lines").at(0).get<int64_t>();
    shard.end_line = job.at("lines").at(1).get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(JournalPath(path), ": ", e.what()));
  }
  const int64_t want =
      shard.journal.checkpoints.empty() ? 0 : shard.journal.checkpoints.back().output_offset;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || static_cast<int64_t>(in.tellg()) != want) {
    return absl::DataLossError(
        absl::StrCat(path, " is not the ", want, " bytes its journal says were written"));
  }
  return shard;
}

// Every shard 0..N-1 once, of one job, their lines following each other.
absl::Status CheckShards(const std::vector<ShardOutput>& shards) {
  const int count = shards.front().count;
  if (static_cast<int>(shards.size()) != count) {
    return absl::InvalidArgumentError(
        absl::StrCat("the job has ", count, " shards; ", shards.size(), " outputs were given"));
  }
  int64_t next_line = 0;
  for (int k = 0; k < count; ++k) {
    const ShardOutput& s = shards[k];
    if (s.index != k || s.count != count) {
      return absl::InvalidArgumentError(absl::StrCat("shard ", k, "/", count, " is missing (",
                                                     s.path, " is shard ", s.index, "/", s.count,
                                                     ")"));
    }
    if (CommonPart(s.journal.job) != CommonPart(shards[0].journal.job)) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.path, " and ", shards[0].path, " come from different jobs"));
    }
    if (s.first_line != next_line) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.path, " starts at line ", s.first_line + 1, ", not ", next_line + 1));
    }
    next_line = s.end_line;
  }
  return absl::OkStatus();
}

absl::Status Concatenate(const std::vector<ShardOutput>& shards, const std::string& output) {
  const std::string tmp = output + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot write '", tmp, "'"));
  absl::Status status;
  std::vector<char> buffer(1 << 20);
  for (const ShardOutput& s : shards) {
    std::ifstream in(s.path, std::ios::binary);
    while (status.ok() && in.read(buffer.data(), buffer.size()).gcount() > 0) {
      status = WriteAll(fd, absl::string_view(buffer.data(), in.gcount()), tmp);
    }
  }
  if (status.ok() && fdatasync(fd) != 0) status = absl::UnavailableError("cannot sync " + tmp);
  close(fd);
  if (status.ok() && rename(tmp.c_str(), output.c_str()) != 0) {
    status = absl::UnavailableError(absl::StrCat("cannot rename '", tmp, "' to '", output, "'"));
  }
  return status;
}

}  // namespace

int MergeShards(const std::string& output, const std::vector<std::string>& shard_outputs) {
  if (shard_outputs.empty()) {
    Log("--merge OUT SHARD_OUTPUT...: name the shards' output files after OUT");
    return kExitUsage;
  }
  std::vector<ShardOutput> shards;
  for (const std::string& path : shard_outputs) {
    absl::StatusOr<ShardOutput> shard = ReadShard(path);
    if (!shard.ok()) {
      Log(shard.status().message());
      return kExitUsage;
    }
    shards.push_back(*std::move(shard));
  }
  std::sort(shards.begin(), shards.end(),
            [](const ShardOutput& a, const ShardOutput& b) { return a.index < b.index; });
  absl::Status s = CheckShards(shards);
  if (s.ok()) s = Concatenate(shards, output);
  if (!s.ok()) {
    Log(s.message());
    return kExitUsage;
  }
  size_t failed = 0;
  for (const ShardOutput& shard : shards) failed += shard.journal.failed.size();
  Log(absl::StrCat("merged ", shards.size(), " shards (", shards.back().end_line, " lines) into ",
                   output));
  if (failed > 0) {
    Log(absl::StrCat(failed, failed == 1 ? " segment" : " segments",
                     " had failed (listed in the shard journals)"));
  }
  return failed ? kExitFailed : kExitOk;
}

}  // namespace glossa::batch
