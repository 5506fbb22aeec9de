// A runtime API call that must succeed: otherwise its error and place are printed and the
// program exits with status 3, apart from the status a run with races ends with (66).
#pragma once
#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (x);                                                                     \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "%s failed: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, __LINE__); \
            exit(3);                                                                              \
        }                                                                                         \
    } while (0)
