// Clearing the vector registers' upper halves after a library's AVX code that leaves them in
// use (ISA-L's CRC kernels have no vzeroupper). While they are in use, every SSE instruction
// that follows, in glibc and in our own code, waits on them: a streaming TT-link lost a third
// of its goodput over UDP and two thirds over shm to it (docs/fabric.md, 2026-12-02).
#pragma once

namespace ttemu {

inline void clear_upper_vector_state() {
#if defined(__x86_64__)
  static const bool avx = __builtin_cpu_supports("avx");  // vzeroupper faults without AVX
  if (avx) asm volatile("vzeroupper" ::: "memory");
#endif
}

}  // namespace ttemu
