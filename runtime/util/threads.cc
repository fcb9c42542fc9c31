#include "util/threads.h"

#include <omp.h>
#include <unistd.h>

#include <cstdlib>

namespace glossa {

void SetComputeThreads(int threads) { omp_set_num_threads(threads > 0 ? threads : 1); }
int ComputeThreads() { return omp_get_max_threads(); }

void UsePassiveOmpWait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with the default policy
}

}  // namespace glossa
