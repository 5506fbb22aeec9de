/* What the scenarios share: the explicit graph API (beyond cuda_min.h), the contexts and
   kernels setup() loads, the helpers of common.c, and the scenarios main.c's table runs. */
#ifndef STREAMSAN_SEMANTICS_H
#define STREAMSAN_SEMANTICS_H
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../cuda_min.h"

/* The explicit graph API's other parameter blocks, laid out as in cuda.h. */
typedef struct {
    CUcontext ctx;
    unsigned count;
    CUstreamBatchMemOpParams *paramArray;
    unsigned flags;
} CUDA_BATCH_MEM_OP_NODE_PARAMS;
CUresult cuGraphAddMemcpyNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_MEMCPY3D *, CUcontext);
CUresult cuGraphAddChildGraphNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraph);
CUresult cuGraphAddEventRecordNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUevent);
CUresult cuGraphAddEventWaitNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUevent);
CUresult cuGraphAddDependencies(CUgraph, const CUgraphNode *, const CUgraphNode *, size_t);
CUresult cuGraphAddBatchMemOpNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_BATCH_MEM_OP_NODE_PARAMS *);
typedef struct {
    CUdeviceptr dst;
    size_t pitch;
    unsigned value, elementSize;
    size_t width, height;
} CUDA_MEMSET_NODE_PARAMS;
/* CUmemPoolProps (88 bytes), then the access descriptors, the size, and the address the
   driver chooses. */
typedef struct {
    int allocType, handleTypes;
    struct { int type, id; } location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} CUmemPoolProps;
typedef struct {
    CUmemPoolProps poolProps;
    const void *accessDescs;
    size_t accessDescCount, bytesize;
    CUdeviceptr dptr;
} CUDA_MEM_ALLOC_NODE_PARAMS;
typedef struct {
    int result;
    CUgraphNode errorNode, errorFromNode;
} CUgraphExecUpdateResultInfo;
CUresult cuGraphAddMemsetNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_MEMSET_NODE_PARAMS *, CUcontext);
CUresult cuGraphAddEmptyNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t);
CUresult cuGraphAddMemAllocNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUDA_MEM_ALLOC_NODE_PARAMS *);
CUresult cuGraphAddMemFreeNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUdeviceptr);
CUresult cuGraphClone(CUgraph *, CUgraph);
CUresult cuGraphDestroyNode(CUgraphNode);
CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *);
CUresult cuGraphMemsetNodeSetParams(CUgraphNode, const CUDA_MEMSET_NODE_PARAMS *);
CUresult cuGraphMemcpyNodeSetParams(CUgraphNode, const CUDA_MEMCPY3D *);
CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec, CUgraphNode, const CUDA_MEMCPY3D *, CUcontext);
CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *);
CUresult cuGraphExecUpdate_v2(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *);
CUresult cuGraphExecUpdate(CUgraphExec, CUgraph, CUgraphNode *, int *);
CUresult cuStreamBeginCaptureToGraph(CUstream, CUgraph, const CUgraphNode *, const void *, size_t, int);
CUresult cuStreamUpdateCaptureDependencies(CUstream, CUgraphNode *, size_t, unsigned);
CUresult cuStreamUpdateCaptureDependencies_v2(CUstream, CUgraphNode *, const void *, size_t, unsigned);

#define N 256 /* bytes per buffer */

extern CUcontext ctx_a, ctx_b; /* two devices, or two contexts of one */
extern CUfunction scale, touch, copy_cfg;

/* common.c */
void setup(void);
CUstream stream(unsigned flags);
CUstream nonblocking(void);
CUstream blocking(void);
CUevent event(void);
CUdeviceptr dalloc(void);
CUdeviceptr dalloc_async(CUstream s);
CUarray array_1d(size_t bytes);
void launch(CUstream s, CUdeviceptr out, CUdeviceptr in);
void writes(CUstream s, CUdeviceptr x);
void reads(CUstream s, CUdeviceptr x);
void touch_both(CUstream s, CUdeviceptr a, CUdeviceptr b);
void touches(CUstream s, CUdeviceptr x);
CUdeviceptr initialized(void);
CUdeviceptr initialized_bytes(size_t bytes);
void order(CUstream from, CUstream to);
void order_if(int fixed, CUstream from, CUstream to);
void run_graph(CUgraph g, CUstream s);
void expect_bytes(const void *got, const void *want, size_t n, const char *what);

/* The scenarios, by file: each runs its racy twin (fixed = 0) or its fixed twin. */
/* streams.c */
void legacy_waits_for_blocking_streams(int), blocking_streams_wait_for_legacy(int),
    per_thread_default_streams(int), per_thread_entry_points(int), green_context_stream(int),
    context_destroy(int);
/* events.c */
void event_wait(int), wait_unrecorded_event(int), event_synchronize(int), event_query(int),
    cupy_wait_event(int), event_record_with_flags(int), refused_wait(int);
/* synchronization.c */
void stream_synchronize(int), stream_query(int), context_synchronize(int),
    context_synchronize_v2(int), sync_free_is_device_wide(int), wait_value(int), host_func(int),
    stream_callback(int), batch_mem_op(int), wait_value_64(int), external_semaphore(int);
/* allocation.c */
void freed_host_range(int), use_before_alloc(int), free_race(int), use_after_free(int),
    annotated_suballocation(int), virtual_memory(int), registered_host_memory(int),
    managed_memory(int), pitched_memory(int), pool_allocation(int), array_destroy_race(int),
    mipmap_destroy_race(int), ipc_memory(int), pool_import(int);
/* accesses.c */
void cross_stream_raw(int), cross_stream_war(int), cross_stream_waw(int);
/* copies.c */
void htod_from_pageable_memory(int), dtoh_joins_the_host(int), dtod_does_not_join_the_host(int),
    unified_copy_between_device_buffers(int), strided_copy(int),
    async_copy_does_not_join_the_host(int), unified_2d_copy_to_pinned_memory(int),
    copy_of_no_bytes(int), strided_copy_cover(int), copy_3d_of_many_slices(int),
    dtoh_async_to_pageable_memory(int), memcpy_batch(int), copy_3d(int), copy_3d_peer(int),
    array_copies(int), array_sides(int), array_of_unknown_element_size(int),
    array_strided_copies(int), mipmap_levels(int), mipmap_3d_levels(int), array_slices(int),
    memcpy_3d_batch(int), batch_3d_pointer_rows(int), batch_3d_array_offset(int);
/* managed_hints.c */
void managed_memory_hints(int);
/* memsets.c */
void memset_of_no_bytes(int), memset_of_device_memory(int), memset_widths(int), memset_2d_rows(int);
/* launches.c */
void chunks_of_one_buffer(int), concurrent_reads(int), untyped_kernels(int),
    untyped_first_touch(int), untyped_learned_output(int), stale_parameter_words(int),
    launch_kernel_ex(int), launch_programmatic_event(int), launch_completion_event(int),
    programmatic_stream_serialization(int), cooperative_launch(int), library_kernels(int),
    enumerated_library_kernels(int);
/* graphs.c */
void graph_branches(int), capture_waits_on_a_later_event(int), graph_launch_order(int),
    built_graph_kernels(int), built_graph_memcpy_after_kernel(int),
    built_graph_memcpy_set_params(int), built_graph_exec_memcpy_set_params(int),
    built_graph_child(int), built_graph_event_record(int), built_graph_event_wait(int),
    built_graph_memset(int), built_graph_memset_of_no_bytes(int),
    built_graph_memset_set_params(int), built_graph_kernel_set_params(int),
    built_graph_exec_kernel_set_params(int), built_graph_exec_update(int),
    built_graph_exec_update_v1(int), built_graph_destroy_node(int), built_graph_clone(int),
    capture_to_graph(int), capture_update_dependencies(int), capture_update_dependencies_v2(int),
    built_graph_mem_alloc(int), built_graph_mem_free(int), refused_instantiate(int);
/* devices.c */
void peer_copy_into_new_array(int), sync_free_and_another_device(int), cross_device_event(int);
/* not_followed.c */
void notes(int);

#endif
