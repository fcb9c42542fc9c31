// glossa-batch --merge OUT SHARD_OUTPUT...: joins the outputs of the shards of one job (--shard
// K/N, K = 0..N-1) into OUT, after checking with their journals that every shard is there once,
// complete, and from the same job.
#ifndef GLOSSA_SERVER_BATCH_MERGE_H_
#define GLOSSA_SERVER_BATCH_MERGE_H_

#include <string>
#include <vector>

namespace glossa::batch {

// Returns an exit code: 0 merged, 1 merged but some segments had failed (as listed in the shard
// journals), 2 nothing written (a shard missing, repeated, incomplete or from another job).
int MergeShards(const std::string& output, const std::vector<std::string>& shard_outputs);

}  // namespace glossa::batch

#endif  // GLOSSA_SERVER_BATCH_MERGE_H_
