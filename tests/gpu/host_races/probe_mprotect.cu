// Probe: do the driver's pinned host mappings accept mprotect, do async copies still
// work from/into protected pages, does the driver itself touch them on the CPU, and what does it cost?
#include <cuda.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static volatile void* fault_addr; static volatile int faults;
static char* prot_lo; static size_t prot_len;
static void on_segv(int, siginfo_t* si, void*) {
  fault_addr = si->si_addr; faults++;
  mprotect(prot_lo, prot_len, PROT_READ | PROT_WRITE);
}
static double now() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s: %s\n", #x, cudaGetErrorString(e)); } } while (0)
static void maps_line(void* p) {
  FILE* f = fopen("/proc/self/maps", "r"); char l[512]; unsigned long a, b;
  while (fgets(l, sizeof l, f)) { sscanf(l, "%lx-%lx", &a, &b); if ((unsigned long)p >= a && (unsigned long)p < b) printf("  maps: %s", l); }
  fclose(f);
}
static void trial(const char* what, char* h, size_t n, char* d, cudaStream_t s) {
  printf("== %s: %p, %zu bytes\n", what, h, n); maps_line(h);
  size_t pg = 4096; prot_lo = (char*)((uintptr_t)h & ~(pg - 1)); prot_len = ((uintptr_t)h + n - (uintptr_t)prot_lo + pg - 1) & ~(pg - 1);
  // H2D from a write-protected source
  memset(h, 7, n);
  int r = mprotect(prot_lo, prot_len, PROT_READ); printf("  mprotect(READ) = %d %s\n", r, r ? strerror(errno) : "");
  CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s)); CK(cudaStreamSynchronize(s));
  int before = faults; ((volatile char*)h)[n / 2] = 1;  // volatile: the store must happen before faults is read printf("  host write to protected source: faults %d -> %d, addr ok %d\n", before, faults, fault_addr == h + n / 2);
  char* back = (char*)malloc(n); CK(cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost));
  int ok = 1; for (size_t i = 0; i < n; i++) ok &= back[i] == 7; printf("  H2D data correct: %d\n", ok);
  // D2H into a fully protected destination
  CK(cudaMemset(d, 9, n)); CK(cudaDeviceSynchronize());
  r = mprotect(prot_lo, prot_len, PROT_NONE); printf("  mprotect(NONE) = %d\n", r);
  before = faults;
  CK(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s)); CK(cudaStreamSynchronize(s));
  printf("  faults during D2H into protected dest: %d\n", faults - before);
  mprotect(prot_lo, prot_len, PROT_READ | PROT_WRITE);
  ok = 1; for (size_t i = 0; i < n; i++) ok &= h[i] == 9; printf("  D2H data correct: %d\n", ok);
  // memset-like: cudaMemsetAsync on device, H2D 2D? skip. Cost of a protect/unprotect pair:
  double t0 = now(); for (int i = 0; i < 10000; i++) { mprotect(prot_lo, prot_len, PROT_READ); mprotect(prot_lo, prot_len, PROT_READ | PROT_WRITE); }
  printf("  mprotect pair: %.0f ns\n", (now() - t0) / 10000);
  free(back);
}
int main() {
  struct sigaction sa = {}; sa.sa_sigaction = on_segv; sa.sa_flags = SA_SIGINFO; sigaction(SIGSEGV, &sa, 0);
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  char* d; CK(cudaMalloc(&d, 64 << 20));
  size_t sizes[] = {4, 64, 4096, 65536, 1 << 20, 16 << 20};
  for (size_t n : sizes) { char* h; CK(cudaHostAlloc(&h, n, cudaHostAllocDefault)); char w[64]; snprintf(w, 64, "cudaHostAlloc %zu", n); trial(w, h, n, d, s); }
  { char* h; CK(cudaHostAlloc(&h, 1 << 20, cudaHostAllocMapped | cudaHostAllocPortable)); trial("cudaHostAlloc mapped|portable 1M", h, 1 << 20, d, s); }
  { char* h; CK(cudaMallocHost(&h, 4096)); trial("cudaMallocHost 4096", h, 4096, d, s); }
  { size_t n = 1 << 20; char* h = (char*)aligned_alloc(4096, n); CK(cudaHostRegister(h, n, 0)); trial("cudaHostRegister 1M", h, n, d, s); }
  { size_t n = 64; char* h = (char*)aligned_alloc(4096, 4096); CK(cudaHostRegister(h, 4096, 0)); trial("cudaHostRegister 64B of a page", h, n, d, s); }
  // a pinned range shared by two allocations: interior offsets
  { char* h; CK(cudaHostAlloc(&h, 3 * 4096, 0)); trial("interior 100B at +5000", h + 5000, 100, d, s); }
  // pageable (control)
  { size_t n = 1 << 20; char* h = (char*)aligned_alloc(4096, n); trial("pageable 1M (control)", h, n, d, s); }
  printf("total faults %d\n", faults);
  return 0;
}
