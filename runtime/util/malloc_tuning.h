#ifndef GLOSSA_RUNTIME_UTIL_MALLOC_TUNING_H_
#define GLOSSA_RUNTIME_UTIL_MALLOC_TUNING_H_

namespace glossa {

// Makes glibc's malloc keep memory the process frees for its next allocations instead of handing it
// back to the kernel at once. A worker encodes a few sources every few steps and frees their
// cross-attention keys and values when they finish: with glibc's defaults those buffers (hundreds
// of KB to MBs) are mapped and unmapped, or trimmed off the heap, again and again, and every page
// of the next one faults in anew — on a virtual machine a page fault is expensive (this call alone:
// demo batch 32 on one core +1-4% tokens/s, alternating runs). Sets the mmap threshold to 32 MB (glibc's largest dynamic value:
// larger blocks are still mapped) and the trim threshold to 256 MB (free memory above it at the top
// of a heap is still returned). Peak RSS grew by 3-4 MB in those runs, and RSS after a burst stays
// nearer its peak. Does nothing when the environment already tunes malloc (GLIBC_TUNABLES naming
// glibc.malloc, or MALLOC_*_ variables). Idempotent; the engine calls it when it is created.
// Returns whether it tuned malloc (the same answer on every call).
bool RetainFreedMemory();

// The opposite, for a process that unloads models and must hand their memory back (a server
// under a memory budget); call it before any engine is created, and RetainFreedMemory() does
// nothing after it. Fixes the mmap threshold at glibc's initial 128 KB: blocks above it are mapped
// and unmapped, where glibc's dynamic threshold would rise to the size of the first large block
// freed and carve later ones from heaps that malloc_trim cannot empty (8 tiny catalogue models
// loaded and unloaded: RSS 51-79 MB after, from 29 MB at start; 32-35 MB with the threshold
// fixed). Returns whether it set it (not when the environment tunes malloc).
bool ReturnFreedMemory();

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_UTIL_MALLOC_TUNING_H_
