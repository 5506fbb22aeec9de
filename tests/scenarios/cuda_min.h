/* The few CUDA driver declarations the scenario programs need (no CUDA install here).
   Types and values as in cuda.h. */
#ifndef STREAMSAN_CUDA_MIN_H
#define STREAMSAN_CUDA_MIN_H
#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef void (*CUhostFn)(void *userData);

#define CUDA_SUCCESS 0
#define CU_STREAM_DEFAULT 0x0
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)
#define CU_GET_PROC_ADDRESS_DEFAULT 0
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 2

/* The kernel every scenario launches: out[i] = 2 * in[i]. Real PTX, so the same text
   works on a GPU; the stand-in reads its .entry and parameter layout. The module also holds
   `extern "C" touch(float *a, float *b)`: a name without a signature, whose pointers may be
   read or written. */
static const char SCALE_PTX[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry _Z5scalePfPKfi(\n"
    "  .param .u64 _Z5scalePfPKfi_param_0,\n"
    "  .param .u64 _Z5scalePfPKfi_param_1,\n"
    "  .param .u32 _Z5scalePfPKfi_param_2\n"
    ")\n{\n ret;\n}\n"
    ".visible .entry touch(\n"
    "  .param .u64 touch_param_0,\n"
    "  .param .u64 touch_param_1\n"
    ")\n{\n ret;\n}\n";
#define SCALE_NAME "_Z5scalePfPKfi"
#define TOUCH_NAME "touch"

#endif
