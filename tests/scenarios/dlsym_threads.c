/* Many threads call dlsym at once while the shim starts, one of them loading a library whose
   constructor looks up and calls the driver (with the loader's lock held). Must neither
   recurse nor deadlock. Built with -DCTOR_LIB into libctor.so, and as the program. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(CTOR_LIB)
__attribute__((constructor)) static void in_constructor(void) {
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(RTLD_DEFAULT, "cuInit");
    if (init) init(0);
}
#else
enum { THREADS = 16, ROUNDS = 2000 };
static pthread_barrier_t start;
static void *lib;
static const char *names[] = {"cuInit", "cuLaunchKernel", "cuMemAllocAsync", "cuGetProcAddress_v2",
                              "cuDeviceGetName", "strlen", "pthread_create", "cuNoSuchFunction"};

static void *worker(void *arg) {
    long id = (long)arg;
    pthread_barrier_wait(&start);
    if (id == 0) {
        void *ctor = dlopen(getenv("CTOR_LIB"), RTLD_NOW);
        if (!ctor) { fprintf(stderr, "dlopen ctor: %s\n", dlerror()); exit(6); }
    }
    for (int i = 0; i < ROUNDS; i++) {
        const char *name = names[(i + id) % (sizeof names / sizeof *names)];
        void *a = dlsym(lib, name);
        void *b = dlsym(lib, name);
        if (a != b) { fprintf(stderr, "dlsym(%s) changed its answer\n", name); exit(7); }
        if (strcmp(name, "cuNoSuchFunction") != 0 && strncmp(name, "cu", 2) == 0 && !a) {
            fprintf(stderr, "dlsym(%s) lost\n", name); exit(8);
        }
    }
    return NULL;
}

int main(void) {
    lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 5; }
    pthread_t t[THREADS];
    pthread_barrier_init(&start, NULL, THREADS);
    for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    printf("%d threads x %d lookups: consistent\n", THREADS, ROUNDS);
    return 0;
}
#endif
