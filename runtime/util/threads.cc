#include "util/threads.h"

#include <omp.h>

namespace glossa {

void SetComputeThreads(int threads) { omp_set_num_threads(threads > 0 ? threads : 1); }
int ComputeThreads() { return omp_get_max_threads(); }

}  // namespace glossa
