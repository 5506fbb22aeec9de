/* A program's life under streamsan: what happens to its report when it has two races, stops
   at one, is killed, crashes, forks, exits with its own status, or leaves without exit's
   handlers (_exit, quick_exit, exec).
   Usage: lifecycle MODE (the modes in main); prints "done" and exits 0 unless said otherwise.
   Built with -DRACE_AT_LOAD -shared, it is a library whose constructor races before the
   preloaded shim's constructor ran (a program's libraries are initialized first). */
#include <alloca.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
#include "cuda_min.h"

static CUfunction scale;
static CUstream s1, s2;


static CUdeviceptr buffer(void) {
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 256));
    return p;
}

static void launch(CUstream s, CUdeviceptr out, CUdeviceptr in) { LAUNCH_SCALE(scale, s, out, in, 64); }

static void order(CUstream from, CUstream to) {
    CUevent e;
    CHECK(cuEventCreate(&e, 0));
    CHECK(cuEventRecord(e, from));
    CHECK(cuStreamWaitEvent(to, e, 0));
}

/* s1 writes x, s2 reads it (a RAW unless ordered). */
static void cross_stream(int ordered) {
    CUdeviceptr x = buffer(), y = buffer(), z = buffer();
    CHECK(cuCtxSynchronize());
    launch(s1, x, y);
    if (ordered) order(s1, s2);
    launch(s2, z, x);
}

/* x allocated on s1, used on s2 (a use-before-alloc unless ordered). */
static void before_alloc(int ordered) {
    CUdeviceptr x, y = buffer();
    CHECK(cuCtxSynchronize());
    CHECK(cuMemAllocAsync(&x, 256, s1));
    if (ordered) order(s1, s2);
    launch(s2, y, x);
}

/* Calls itself `n` times, then makes a RAW: the call's stack holds `n` frames of deep(). The
   empty statement after the call keeps it from being a jump, which would leave no frame. */
__attribute__((noinline)) static void deep(int n) {
    if (n > 0)
        deep(n - 1);
    else
        cross_stream(0);
    __asm__ volatile("" ::: "memory");
}

/* 100 times on s1, from a frame `pad` bytes deeper than it would be: a cuLaunchKernel, a
   cuLaunchKernelEx and a cuMemsetD8Async of `out`. The same call chains (the same return
   addresses), their frames `pad` bytes further down the stack. */
__attribute__((noinline)) static void launch_padded(size_t pad, CUdeviceptr out, CUdeviceptr in) {
    volatile char *room = alloca(pad + 1);
    room[0] = 0;
    for (int i = 0; i < 100; i++) {
        launch(s1, out, in);
        int n = 64;
        void *params[] = {&out, &in, &n};
        CUlaunchConfig config = {1, 1, 1, 64, 1, 1, 0, s1, NULL, 0};
        CHECK(cuLaunchKernelEx(&config, scale, params, NULL));
        CHECK(cuMemsetD8Async(out, 0, 256, s1));
    }
    __asm__ volatile("" ::: "memory");
}

#if defined(RACE_AT_LOAD)
__attribute__((constructor)) static void race_at_load(void) {
    setup_scale_and_two_streams(&scale, &s1, &s2);
    cross_stream(0);
}
#else
int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    setup_scale_and_two_streams(&scale, &s1, &s2);
    if (strcmp(mode, "clean") == 0) {
        /* The work of "races", ordered. */
        cross_stream(1);
        before_alloc(1);
    } else if (strcmp(mode, "races") == 0 || strcmp(mode, "fail") == 0) {
        /* Two races of two kinds; "fail" then exits 3. */
        cross_stream(0);
        before_alloc(0);
        if (strcmp(mode, "fail") == 0) return 3;
    } else if (strcmp(mode, "sleep") == 0) {
        /* Waits to be killed. */
        cross_stream(0);
        CHECK(cuCtxSynchronize()); /* only the final report counts this one */
        printf("raced\n");
        fflush(stdout);
        for (;;) pause();
    } else if (strcmp(mode, "crash") == 0) {
        cross_stream(0);
        CHECK(cuCtxSynchronize()); /* only the final report counts this one */
        fflush(stdout);
        raise(SIGSEGV);
    } else if (strcmp(mode, "fault") == 0) {
        cross_stream(0);
        CHECK(cuCtxSynchronize());
        fflush(stdout);
        *(volatile int *)16 = 1; /* a fault at address 0x10 */
    } else if (strcmp(mode, "late") == 0) {
        /* The race is queued with the launches after it, and still reported (at once, before
           "raced", with halt_on_error=1). */
        CUdeviceptr y = buffer(), z = buffer();
        cross_stream(0);
        fprintf(stderr, "raced\n");
        for (int i = 0; i < 100; i++) launch(s1, y, z);
        fprintf(stderr, "launched\n");
    } else if (strcmp(mode, "deep") == 0) {
        /* Call sites deeper than the default backtrace depth. */
        deep(60);
    } else if (strcmp(mode, "offsets") == 0) {
        /* The same call chains from four stack positions 16 bytes apart: their frames lie at
           another offset from the stack's 64-byte lines each time. */
        CUdeviceptr y = buffer(), z = buffer();
        for (size_t pad = 0; pad < 64; pad += 16) launch_padded(pad, y, z);
    } else if (strcmp(mode, "fork") == 0) {
        /* A child with a race of another kind; the parent waits for it. */
        cross_stream(0);
        fflush(stdout);
        pid_t child = fork();
        if (child == 0) {
            before_alloc(0);
            exit(0);
        }
        int status;
        waitpid(child, &status, 0);
        printf("child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    } else if (strcmp(mode, "_exit") == 0 || strcmp(mode, "quick_exit") == 0 || strncmp(mode, "exec", 4) == 0) {
        /* A race among launches, a synchronize, then a way out that runs no exit handler:
           _exit(0), quick_exit(0), or an exec of this program's "clean" mode (execv, or
           execl, execlp, execle with their argument lists). */
        cross_stream(0);
        CHECK(cuCtxSynchronize());
        printf("raced\n");
        fflush(stdout);
        if (strcmp(mode, "_exit") == 0) _exit(0);
        if (strcmp(mode, "quick_exit") == 0) quick_exit(0);
        if (strcmp(mode, "execl") == 0) execl(argv[0], argv[0], "clean", (char *)NULL);
        if (strcmp(mode, "execlp") == 0) execlp(argv[0], argv[0], "clean", (char *)NULL);
        if (strcmp(mode, "execle") == 0) execle(argv[0], argv[0], "clean", (char *)NULL, environ);
        char *clean[] = {argv[0], "clean", NULL};
        execv(argv[0], clean);
        perror("exec");
        return 1;
    } else if (strcmp(mode, "forked_exit") == 0) {
        /* Four children, each with a race among launches, ending in _exit(0) as Python's
           multiprocessing ends them; the parent prints their statuses. */
        fflush(stdout);
        for (int i = 0; i < 4; i++) {
            if (fork() == 0) {
                cross_stream(0);
                CHECK(cuCtxSynchronize());
                _exit(0);
            }
        }
        int status;
        while (wait(&status) > 0) printf("child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    } else {
        fprintf(stderr, "usage: lifecycle races|clean|fail|sleep|crash|fault|fork|late|deep|offsets|"
                        "_exit|quick_exit|exec|forked_exit\n");
        return 2;
    }
    printf("done\n");
    return 0;
}
#endif
