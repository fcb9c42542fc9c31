#ifndef GLOSSA_RUNTIME_UTIL_THREADS_H_
#define GLOSSA_RUNTIME_UTIL_THREADS_H_

namespace glossa {

// Sets the OpenMP team size oneDNN uses on the calling thread (and threads started after).
// One thread per engine worker is the right default on small machines: oversubscribed OpenMP
// teams spin against each other (see NOTES-debian.md).
void SetComputeThreads(int threads);
int ComputeThreads();

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_UTIL_THREADS_H_
