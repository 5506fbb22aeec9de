/* A program that finds races and then meets a fault: the report's life under kill, raise,
   its own signal handler, or a plain exit.
   Usage: faults N ACTION: N races at N different pairs of call sites (up to 1024), then the
   ACTION (in main). */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cuda_min.h"

static CUfunction scale;
static CUstream s1, s2;
static volatile int steps;


/* s1 writes x, s2 reads it: a RAW. */
__attribute__((noinline)) static void one_race(void) {
    CUdeviceptr x, y, z;
    CHECK(cuMemAlloc_v2(&x, 256));
    CHECK(cuMemAlloc_v2(&y, 256));
    CHECK(cuMemAlloc_v2(&z, 256));
    CHECK(cuCtxSynchronize());
    LAUNCH_SCALE(scale, s1, x, y, 64);
    LAUNCH_SCALE(scale, s2, z, x, 64);
}

/* Reaches one_race through `levels` frames, each called from one of two call sites as the
   bits of `path` say: 2^levels different call stacks. */
__attribute__((noinline)) static void walk(unsigned path, int levels, int site) {
    steps += site;
    if (levels == 0) {
        one_race();
    } else if (path & 1) {
        walk(path >> 1, levels - 1, 1);
        steps++;
    } else {
        walk(path >> 1, levels - 1, 2);
        steps--;
    }
}

static void handled(int signal) {
    (void)signal;
    static const char text[] = "handled\n";
    write(1, text, sizeof text - 1);
    _exit(7);
}

static void end_this_thread(void *unused) {
    (void)unused;
    pthread_exit(NULL);
}
static void end_this_thread_callback(CUstream s, CUresult status, void *unused) {
    (void)s;
    (void)status;
    end_this_thread(unused);
}

static void *run_host_functions(void *unused) {
    (void)unused;
    void (*run)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "standinRunCallbacks");
    if (run) run();
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: faults N exit|sleep|launched|raise SIG|handled|thread_exit\n");
        return 2;
    }
    int races = atoi(argv[1]);
    const char *action = argv[2];
    if (strcmp(action, "handled") == 0) signal(SIGTERM, handled);
    setup_scale_and_two_streams(&scale, &s1, &s2);
    for (int i = 0; i < races; i++) walk((unsigned)i, 10, 0);
    if (strcmp(action, "launched") == 0) {
        /* As "sleep", without synchronizing first: the last race is among launches no later
           call tells the model of. */
        printf("raced\n");
        fflush(stdout);
        for (;;) pause();
    }
    CHECK(cuCtxSynchronize());
    if (strcmp(action, "exit") == 0) {
        printf("done\n");
    } else if (strcmp(action, "sleep") == 0) {
        /* Waits to be killed. */
        printf("raced\n");
        fflush(stdout);
        for (;;) pause();
    } else if (strcmp(action, "raise") == 0 && argc > 3) {
        fflush(stdout);
        raise(atoi(argv[3]));
        printf("survived\n");
    } else if (strcmp(action, "thread_exit") == 0) {
        /* A host function, then a stream callback, each ending the thread that runs it (as
           CPython ends a thread that takes the GIL while the interpreter finalizes), each run
           on a thread of its own (the stand-in, with STANDIN_DEFER_CALLBACKS=1, runs them
           when asked). */
        for (int callback = 0; callback < 2; callback++) {
            if (callback)
                CHECK(cuStreamAddCallback(s1, end_this_thread_callback, NULL, 0));
            else
                CHECK(cuLaunchHostFunc(s1, end_this_thread, NULL));
            pthread_t driver;
            pthread_create(&driver, NULL, run_host_functions, NULL);
            pthread_join(driver, NULL);
            printf("joined\n");
        }
    } else if (strcmp(action, "handled") == 0) {
        /* The program's own handler, installed before its first driver call, prints
           "handled" and ends the process with _exit(7). */
        fflush(stdout);
        raise(SIGTERM);
        printf("survived\n");
    } else {
        fprintf(stderr, "usage: faults N exit|sleep|launched|raise SIG|handled|thread_exit\n");
        return 2;
    }
    return 0;
}
