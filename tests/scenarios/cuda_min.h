/* The few CUDA driver declarations the scenario programs need (no CUDA install here).
   Types and values as in cuda.h. */
#ifndef STREAMSAN_CUDA_MIN_H
#define STREAMSAN_CUDA_MIN_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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
typedef struct CUarray_st *CUarray;
typedef struct CUmipmappedArray_st *CUmipmappedArray;
typedef enum { CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_DEVICE = 2, CU_MEMORYTYPE_ARRAY = 3, CU_MEMORYTYPE_UNIFIED = 4 } CUmemorytype;
/* A 2D copy's descriptor, laid out as in cuda.h. */
typedef struct {
    size_t srcXInBytes, srcY;
    CUmemorytype srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    CUarray srcArray;
    size_t srcPitch;
    size_t dstXInBytes, dstY;
    CUmemorytype dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    CUarray dstArray;
    size_t dstPitch;
    size_t WidthInBytes, Height;
} CUDA_MEMCPY2D;

/* A 3D copy's descriptor, laid out as in cuda.h; the peer variant names its contexts where
   the plain one has reserved words. */
typedef struct {
    size_t srcXInBytes, srcY, srcZ, srcLOD;
    CUmemorytype srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    CUarray srcArray;
    void *reserved0;
    size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD;
    CUmemorytype dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    CUarray dstArray;
    void *reserved1;
    size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D;
typedef struct {
    size_t srcXInBytes, srcY, srcZ, srcLOD;
    CUmemorytype srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    CUarray srcArray;
    CUcontext srcContext;
    size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD;
    CUmemorytype dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    CUarray dstArray;
    CUcontext dstContext;
    size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D_PEER;

/* cuLaunchKernelEx's configuration and attributes (the value is a 64-byte union). */
#define CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6
#define CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT 7
#define CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT 12
typedef union {
    char pad[64];
    int programmaticStreamSerializationAllowed;
    struct {
        CUevent event;
        int flags;
        int triggerAtBlockStart;
    } programmaticEvent;
    struct {
        CUevent event;
        int flags;
    } launchCompletionEvent;
} CUlaunchAttributeValue;
typedef struct {
    int id;
    char pad[4];
    CUlaunchAttributeValue value;
} CUlaunchAttribute;
typedef struct {
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned numAttrs;
} CUlaunchConfig;

/* Memory locations, copy attributes, virtual memory management. */
#define CU_MEM_LOCATION_TYPE_DEVICE 1
typedef struct {
    int type;
    int id;
} CUmemLocation;
#define CU_MEMCPY_SRC_ACCESS_ORDER_STREAM 1
typedef struct {
    int srcAccessOrder;
    CUmemLocation srcLocHint, dstLocHint;
    unsigned flags;
} CUmemcpyAttributes;
typedef unsigned long long CUmemGenericAllocationHandle;
#define CU_MEM_ALLOCATION_TYPE_PINNED 1
typedef struct {
    int type;
    int requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType, gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;
#define CU_MEM_ACCESS_FLAGS_PROT_READWRITE 3
typedef struct {
    CUmemLocation location;
    int flags;
} CUmemAccessDesc;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
#define CU_MEM_ATTACH_GLOBAL 0x1
#define CU_MEM_ATTACH_SINGLE 0x4
#define CU_MEMHOSTALLOC_PORTABLE 0x1
#define CU_EVENT_DISABLE_TIMING 0x2

/* cuStreamBatchMemOp's operations: a 48-byte union whose wait and write members share this
   layout. */
#define CU_STREAM_MEM_OP_WAIT_VALUE_32 1
#define CU_STREAM_MEM_OP_WRITE_VALUE_32 2
typedef union {
    int operation;
    struct {
        int operation;
        CUdeviceptr address;
        unsigned long long value;
        unsigned flags;
        CUdeviceptr alias;
    } waitValue, writeValue;
    unsigned long long pad[6];
} CUstreamBatchMemOpParams;

/* Arrays, and the operations of a batch of 3D copies between pointers and arrays. */
#define CU_AD_FORMAT_UNSIGNED_INT8 0x01
typedef struct {
    size_t Width, Height;
    int Format;
    unsigned NumChannels;
} CUDA_ARRAY_DESCRIPTOR;
typedef struct {
    size_t Width, Height, Depth;
    int Format;
    unsigned NumChannels, Flags;
} CUDA_ARRAY3D_DESCRIPTOR;
#define CU_MEMCPY_OPERAND_TYPE_POINTER 1
#define CU_MEMCPY_OPERAND_TYPE_ARRAY 2
typedef struct {
    int type;
    union {
        struct {
            CUdeviceptr ptr;
            size_t rowLength, layerHeight;
            CUmemLocation locHint;
        } ptr;
        struct {
            CUarray array;
            struct { size_t x, y, z; } offset;
        } array;
    } op;
} CUmemcpy3DOperand;
typedef struct {
    CUmemcpy3DOperand src, dst;
    struct { size_t width, height, depth; } extent;
    int srcAccessOrder;
    unsigned flags;
} CUDA_MEMCPY3D_BATCH_OP;

typedef struct CUlib_st *CUlibrary;
typedef struct CUkern_st *CUkernel;

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
   read or written; and copy_cfg, below. */
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
    ")\n{\n ret;\n}\n"
    ".visible .entry _Z8copy_cfg7CopyCfg(\n"
    "  .param .align 8 .b8 _Z8copy_cfg7CopyCfg_param_0[40]\n"
    ")\n{\n ret;\n}\n";
#define SCALE_NAME "_Z5scalePfPKfi"
#define TOUCH_NAME "touch"
/* copy_cfg(CopyCfg): a typed kernel whose one parameter is a structure passed by value, as
   PyTorch's elementwise kernels take their TensorIterator's offsets and pointers. */
#define COPY_CFG_NAME "_Z8copy_cfg7CopyCfg"

/* Stops the program when a driver call fails, with exit status 4 (distinct from the statuses
   the programs choose). A program whose checks run in an exit handler defines CHECK_EXIT as
   _exit first. */
#ifndef CHECK_EXIT
#define CHECK_EXIT exit
#endif
#define CHECK(call)                                                            \
    do {                                                                       \
        CUresult rc_ = (call);                                                 \
        if (rc_ != CUDA_SUCCESS) {                                             \
            fprintf(stderr, "%s failed: %d (line %d)\n", #call, rc_, __LINE__); \
            CHECK_EXIT(4);                                                     \
        }                                                                      \
    } while (0)

/* The driver functions the programs linked with -lcuda call (the others look them up). */
CUresult cuInit(unsigned);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDeviceGetCount(int *);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuCtxCreate_v2(CUcontext *, unsigned, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxSynchronize(void);
CUresult cuCtxSynchronize_v2(CUcontext ctx);
CUresult cuCtxGetCurrent(CUcontext *pctx);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamQuery(CUstream);
CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventSynchronize(CUevent);
CUresult cuEventQuery(CUevent);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemAllocHost_v2(void **, size_t);
CUresult cuMemHostRegister_v2(void *, size_t, unsigned);
CUresult cuMemHostUnregister(void *);
#define CU_MEMHOSTREGISTER_PORTABLE 0x01
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuMemcpyDtoD_v2(CUdeviceptr, CUdeviceptr, size_t);
CUresult cuMemcpy(CUdeviceptr, CUdeviceptr, size_t);
CUresult cuMemcpyAsync(CUdeviceptr, CUdeviceptr, size_t, CUstream);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void *, size_t, CUstream);
CUresult cuMemcpyDtoHAsync_v2(void *, CUdeviceptr, size_t, CUstream);
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *, CUstream);
CUresult cuMemcpyPeerAsync(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
/* CUDA IPC: 64 opaque bytes a process hands another. */
typedef struct {
    char reserved[64];
} CUipcMemHandle, CUipcEventHandle;
#define CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1
#define CU_EVENT_INTERPROCESS 0x4
CUresult cuIpcGetMemHandle(CUipcMemHandle *, CUdeviceptr);
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *, CUipcMemHandle, unsigned);
CUresult cuIpcCloseMemHandle(CUdeviceptr);
CUresult cuIpcGetEventHandle(CUipcEventHandle *, CUevent);
CUresult cuIpcOpenEventHandle(CUevent *, CUipcEventHandle);
CUresult cuMemPoolExportPointer(void *, CUdeviceptr);
CUresult cuMemPoolImportPointer(CUdeviceptr *, CUmemoryPool, void *);
CUresult cuMemsetD8_v2(CUdeviceptr, unsigned char, size_t);
CUresult cuMemsetD8Async(CUdeviceptr, unsigned char, size_t, CUstream);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuFuncSetAttribute(CUfunction, int, int);
CUresult cuModuleGetGlobal_v2(CUdeviceptr *, size_t *, CUmodule, const char *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        CUstream, void **, void **);
CUresult cuLaunchHostFunc(CUstream, CUhostFn, void *);
CUresult cuStreamAddCallback(CUstream, void (*)(CUstream, CUresult, void *), void *, unsigned);
CUresult cuStreamWaitValue32_v2(CUstream, CUdeviceptr, unsigned, unsigned);
CUresult cuStreamWriteValue32_v2(CUstream, CUdeviceptr, unsigned, unsigned);
CUresult cuStreamBeginCapture_v2(CUstream, int);
CUresult cuStreamEndCapture(CUstream, CUgraph *);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *, CUgraph, unsigned long long);
/* The explicit graph API's kernel node, laid out as in cuda.h. */
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct {
    CUfunction func;
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void **kernelParams, **extra;
    void *kern;
    CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS;
CUresult cuGraphAddKernelNode_v2(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_KERNEL_NODE_PARAMS *);
/* An edge's annotation, laid out as in cuda.h: a programmatic edge from a kernel node's
   programmatic port lets the downstream kernel start once the upstream one triggers it. */
typedef struct {
    unsigned char from_port, to_port, type, reserved[5];
} CUgraphEdgeData;
#define CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC 1
#define CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC 1
#define CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER 2
CUresult cuGraphAddDependencies_v2(CUgraph, const CUgraphNode *, const CUgraphNode *, const CUgraphEdgeData *, size_t);
/* A node of any type, laid out as in cuda.h: its type, then a union of each type's parameters. */
#define CU_GRAPH_NODE_TYPE_KERNEL 0
typedef struct {
    int type;
    int reserved0[3];
    union {
        long long reserved1[29];
        CUDA_KERNEL_NODE_PARAMS kernel;
    };
    long long reserved2;
} CUgraphNodeParams;
CUresult cuGraphAddNode_v2(CUgraphNode *, CUgraph, const CUgraphNode *, const CUgraphEdgeData *, size_t,
                           CUgraphNodeParams *);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuGraphCreate(CUgraph *, unsigned);
CUresult cuStreamDestroy_v2(CUstream);
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr, CUdeviceptr, size_t, CUstream);
CUresult cuModuleUnload(CUmodule);
CUresult cuEventDestroy_v2(CUevent);

CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *);
CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *, CUstream);
CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *);
CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *);
CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *, CUstream);
CUresult cuMemcpyBatchAsync(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *, size_t *, size_t,
                            size_t *, CUstream);
CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *, size_t *, size_t,
                               CUstream);
CUresult cuMemcpy3DBatchAsync(size_t, CUDA_MEMCPY3D_BATCH_OP *, size_t *, unsigned long long, CUstream);
CUresult cuMemcpy3DBatchAsync_v2(size_t, CUDA_MEMCPY3D_BATCH_OP *, unsigned long long, CUstream);
CUresult cuMemsetD16_v2(CUdeviceptr, unsigned short, size_t);
CUresult cuMemsetD32_v2(CUdeviceptr, unsigned, size_t);
CUresult cuMemsetD2D8_v2(CUdeviceptr, size_t, unsigned char, size_t, size_t);
CUresult cuMemsetD2D16_v2(CUdeviceptr, size_t, unsigned short, size_t, size_t);
CUresult cuMemsetD2D32_v2(CUdeviceptr, size_t, unsigned, size_t, size_t);
CUresult cuMemsetD16Async(CUdeviceptr, unsigned short, size_t, CUstream);
CUresult cuMemsetD32Async(CUdeviceptr, unsigned, size_t, CUstream);
CUresult cuMemsetD2D8Async(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream);
CUresult cuMemsetD2D16Async(CUdeviceptr, size_t, unsigned short, size_t, size_t, CUstream);
CUresult cuMemsetD2D32Async(CUdeviceptr, size_t, unsigned, size_t, size_t, CUstream);
CUresult cuLaunchKernelEx(const CUlaunchConfig *, CUfunction, void **, void **);
CUresult cuStreamSetAttribute(CUstream, int, const CUlaunchAttributeValue *);
CUresult cuLaunchCooperativeKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   CUstream, void **);
CUresult cuStreamBatchMemOp_v2(CUstream, unsigned, CUstreamBatchMemOpParams *, unsigned);
CUresult cuStreamWaitValue64_v2(CUstream, CUdeviceptr, unsigned long long, unsigned);
CUresult cuStreamWriteValue64_v2(CUstream, CUdeviceptr, unsigned long long, unsigned);
CUresult cuMemGetAllocationGranularity(size_t *, const CUmemAllocationProp *, int);
CUresult cuMemAddressReserve(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
CUresult cuMemAddressFree(CUdeviceptr, size_t);
CUresult cuMemCreate(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
CUresult cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
CUresult cuMemSetAccess(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
CUresult cuMemUnmap(CUdeviceptr, size_t);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuMemHostRegister_v2(void *, size_t, unsigned);
CUresult cuMemHostUnregister(void *);
CUresult cuMemHostAlloc(void **, size_t, unsigned);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *, CUdevice);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
CUresult cuEventRecordWithFlags(CUevent, CUstream, unsigned);
CUresult cuLibraryLoadData(CUlibrary *, const void *, void *, void **, unsigned, void *, void **, unsigned);
CUresult cuLibraryGetKernel(CUkernel *, CUlibrary, const char *);
CUresult cuKernelGetFunction(CUfunction *, CUkernel);
CUresult cuLibraryUnload(CUlibrary);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuMemPrefetchAsync_v2(CUdeviceptr, size_t, CUmemLocation, unsigned, CUstream);
CUresult cuMemAdvise_v2(CUdeviceptr, size_t, int, CUmemLocation);
CUresult cuStreamAttachMemAsync(CUstream, CUdeviceptr, size_t, unsigned);
CUresult cuArrayCreate_v2(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
CUresult cuArray3DCreate_v2(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
CUresult cuArrayDestroy(CUarray);
CUresult cuMipmappedArrayCreate(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned);
CUresult cuMipmappedArrayGetLevel(CUarray *, CUmipmappedArray, unsigned);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray);
CUresult cuMemcpyDtoA_v2(CUarray, size_t, CUdeviceptr, size_t);
CUresult cuMemcpyAtoD_v2(CUdeviceptr, CUarray, size_t, size_t);
CUresult cuMemcpyHtoA_v2(CUarray, size_t, const void *, size_t);
CUresult cuMemcpyAtoH_v2(void *, CUarray, size_t, size_t);
CUresult cuMemcpyAtoA_v2(CUarray, size_t, CUarray, size_t, size_t);
CUresult cuMemcpyHtoAAsync_v2(CUarray, size_t, const void *, size_t, CUstream);
CUresult cuMemcpyAtoHAsync_v2(void *, CUarray, size_t, size_t, CUstream);

/* The first device's primary context, made current. */
static inline void primary_context(void) {
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
}

/* The first device's primary context made current, `scale` loaded, and two non-blocking
   streams: what most small test programs start with. */
static inline void setup_scale_and_two_streams(CUfunction *scale, CUstream *s1, CUstream *s2) {
    CUmodule module;
    primary_context();
    CHECK(cuModuleLoadData(&module, SCALE_PTX));
    CHECK(cuModuleGetFunction(scale, module, SCALE_NAME));
    CHECK(cuStreamCreate(s1, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(s2, CU_STREAM_NON_BLOCKING));
}

/* Launches `scale(out, in, n)` as one block of 64 threads on `stream`. A macro, so that the
   launch's call site is the program's own line, not this header's. */
#define LAUNCH_SCALE(scale, stream, out, in, n)                                     \
    do {                                                                            \
        CUdeviceptr out_ = (out), in_ = (in);                                       \
        int n_ = (n);                                                               \
        void *params_[] = {&out_, &in_, &n_};                                       \
        CHECK(cuLaunchKernel((scale), 1, 1, 1, 64, 1, 1, 0, (stream), params_, NULL)); \
    } while (0)

#endif
