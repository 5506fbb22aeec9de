// Probe: can the host's accesses to managed and mapped memory be seen by page protection
// without changing what the program computes? Kernels on protected pages, the host's fault
// on them and the driver's migration back, prefetches, copies and memsets the driver makes,
// and the cost of a protect/unprotect pair and of a fault.
// Build: nvcc -O2 -o probe_managed probe_managed.cu -lcuda     Run: ./probe_managed
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

static volatile int faults;
static volatile void* fault_addr;
static char* prot_lo;
static size_t prot_len;
static void on_segv(int, siginfo_t* si, void*) {
  fault_addr = si->si_addr;
  faults++;
  mprotect(prot_lo, prot_len, PROT_READ | PROT_WRITE);
}
static double now() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
#define CK(x) do { cudaError_t e = (x); if (e) printf("  %s: %s\n", #x, cudaGetErrorString(e)); } while (0)

__global__ void fill(int* p, size_t n, int v) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v + (int)(i & 7);
}
__global__ void spin_fill(int* p, size_t n, int v, long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {}
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v + (int)(i & 7);
}
__managed__ int module_var[1024];

static void maps_line(void* p) {
  FILE* f = fopen("/proc/self/maps", "r"); char l[512]; unsigned long a, b;
  while (fgets(l, sizeof l, f)) { sscanf(l, "%lx-%lx", &a, &b); if ((unsigned long)p >= a && (unsigned long)p < b) printf("  maps: %s", l); }
  fclose(f);
}
static void guard(void* p, size_t n, int prot) {
  prot_lo = (char*)((uintptr_t)p & ~(uintptr_t)4095);
  prot_len = ((uintptr_t)p + n - (uintptr_t)prot_lo + 4095) & ~(size_t)4095;
  int r = mprotect(prot_lo, prot_len, prot);
  if (r) printf("  mprotect(%d) = %d %s\n", prot, r, strerror(errno));
}
static int check(const int* p, size_t n, int v) {
  for (size_t i = 0; i < n; i++) if (p[i] != v + (int)(i & 7)) return 0;
  return 1;
}

// One allocation (managed or mapped): host use around kernels on guarded pages.
static void trial(const char* what, int* host, int* dev, size_t n, cudaStream_t s) {
  size_t bytes = n * sizeof(int);
  printf("== %s: %p, %zu bytes\n", what, (void*)host, bytes);
  maps_line(host);
  for (size_t i = 0; i < n; i++) host[i] = -1;
  // 1. A kernel writes pages the host cannot touch; the host reads after the synchronize.
  guard(host, bytes, PROT_NONE);
  fill<<<64, 256, 0, s>>>(dev, n, 10);
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(s));
  int before = faults;
  int ok = check(host, n, 10);
  printf("  kernel on PROT_NONE pages: host read faults %d (addr in range %d), data correct %d\n", faults - before,
         (char*)fault_addr >= prot_lo && (char*)fault_addr < prot_lo + prot_len, ok);
  // 2. The host reads while a kernel still writes (the race the guard must see).
  guard(host, bytes, PROT_NONE);
  spin_fill<<<64, 256, 0, s>>>(dev, n, 20, 20000000);
  before = faults;
  volatile int early = host[n / 2];
  (void)early;
  printf("  host read during kernel: faults %d\n", faults - before);
  CK(cudaStreamSynchronize(s));
  printf("  after sync data correct %d\n", check(host, n, 20));
  // 3. Read-only protection: the host reads a buffer a kernel reads.
  guard(host, bytes, PROT_READ);
  before = faults;
  fill<<<64, 256, 0, s>>>(dev, n, 30);
  CK(cudaStreamSynchronize(s));
  ok = check(host, n, 30);
  printf("  kernel writes PROT_READ pages: host read faults %d, data correct %d\n", faults - before, ok);
  guard(host, bytes, PROT_READ | PROT_WRITE);
  // 4. Driver work on protected pages: memset, copies in and out, prefetch.
  int* other;
  CK(cudaMalloc(&other, bytes));
  guard(host, bytes, PROT_NONE);
  before = faults;
  CK(cudaMemsetAsync(dev, 0, bytes, s));
  CK(cudaMemcpyAsync(other, dev, bytes, cudaMemcpyDefault, s));
  fill<<<64, 256, 0, s>>>(other, n, 40);
  CK(cudaMemcpyAsync(dev, other, bytes, cudaMemcpyDefault, s));
  CK(cudaStreamSynchronize(s));
  printf("  memset+copies on PROT_NONE pages: faults during %d\n", faults - before);
  before = faults;
  printf("  data correct %d (faults %d)\n", check(host, n, 40), faults - before);
  CK(cudaFree(other));
  // 5. Cost: a protect/unprotect pair, and a fault that unprotects.
  double t0 = now();
  for (int i = 0; i < 2000; i++) { guard(host, bytes, PROT_NONE); guard(host, bytes, PROT_READ | PROT_WRITE); }
  printf("  mprotect pair: %.0f ns\n", (now() - t0) / 2000);
  t0 = now();
  for (int i = 0; i < 2000; i++) { guard(host, bytes, PROT_NONE); (void)*(volatile int*)host; }
  printf("  protect + fault + unprotect (pages on the host): %.0f ns\n", (now() - t0) / 2000);
}

int main() {
  struct sigaction sa = {};
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, 0);
  int dev = 0, cma = 0, pma = 0, ats = 0;
  cudaDeviceGetAttribute(&cma, cudaDevAttrConcurrentManagedAccess, dev);
  cudaDeviceGetAttribute(&pma, cudaDevAttrPageableMemoryAccess, dev);
  cudaDeviceGetAttribute(&ats, cudaDevAttrPageableMemoryAccessUsesHostPageTables, dev);
  printf("concurrentManagedAccess %d pageableMemoryAccess %d usesHostPageTables %d\n", cma, pma, ats);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  size_t sizes[] = {1024, 1 << 18, 16 << 20};
  for (size_t n : sizes) {
    int* p;
    CK(cudaMallocManaged(&p, n * sizeof(int)));
    char w[80];
    snprintf(w, sizeof w, "cudaMallocManaged %zu ints", n);
    trial(w, p, p, n, s);
    // Prefetches both ways on protected pages.
    guard(p, n * sizeof(int), PROT_NONE);
    int before = faults;
    cudaMemLocation gpu = {cudaMemLocationTypeDevice, 0}, cpu = {cudaMemLocationTypeHost, 0};
    CK(cudaMemPrefetchAsync(p, n * sizeof(int), gpu, 0, s));
    CK(cudaMemPrefetchAsync(p, n * sizeof(int), cpu, 0, s));
    CK(cudaStreamSynchronize(s));
    printf("  prefetch to GPU and back on PROT_NONE pages: faults %d\n", faults - before);
    guard(p, n * sizeof(int), PROT_READ | PROT_WRITE);
    CK(cudaFree(p));
  }
  {
    int* p;
    CK(cudaMallocManaged(&p, 4096 * sizeof(int), cudaMemAttachHost));
    trial("cudaMallocManaged attachHost 4096 ints", p, p, 4096, s);
  }
  trial("__managed__ variable", module_var, module_var, 1024, s);
  {
    int *h, *d;
    size_t n = 1 << 18;
    CK(cudaHostAlloc(&h, n * sizeof(int), cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void**)&d, h, 0));
    trial("cudaHostAlloc mapped (zero-copy)", h, d, n, s);
  }
  {
    size_t n = 1 << 18;
    int* h = (int*)aligned_alloc(4096, n * sizeof(int));
    int* d;
    CK(cudaHostRegister(h, n * sizeof(int), cudaHostRegisterMapped));
    CK(cudaHostGetDevicePointer((void**)&d, h, 0));
    trial("cudaHostRegister mapped", h, d, n, s);
  }
  printf("total faults %d\n", faults);
  return 0;
}
