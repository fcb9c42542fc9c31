#ifndef GLOSSA_RUNTIME_UTIL_THREADS_H_
#define GLOSSA_RUNTIME_UTIL_THREADS_H_

namespace glossa {

// Sets the OpenMP team size oneDNN uses on the calling thread (and threads started after).
// One thread per engine worker is the right default on small machines: oversubscribed OpenMP
// teams spin against each other (see NOTES-debian.md).
void SetComputeThreads(int threads);
int ComputeThreads();

// Makes OpenMP threads sleep rather than spin while they wait, unless the environment already
// chose (OMP_WAIT_POLICY set): libgomp's default spinning made 2-thread teams 30x slower on a
// shared 2-core machine (NOTES-debian.md; glossa-load 1x2: 225 target tokens/s against 1,662
// for 1x1). libgomp reads the variable when the program loads, so this sets it and re-executes
// the program once (argv unchanged); call it first thing in main. Returns only if it did not
// re-execute (the variable was set, or exec failed).
void UsePassiveOmpWait(char** argv);
}  // namespace glossa

#endif  // GLOSSA_RUNTIME_UTIL_THREADS_H_
