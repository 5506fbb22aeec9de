/* Capture and graphs (docs/semantics.md#capture-and-graphs): captured graphs, graphs built
   with the explicit graph API, captures into a graph. */
#include "semantics.h"

#define CU_STREAM_CAPTURE_MODE_GLOBAL 0
#define CU_EVENT_WAIT_EXTERNAL 0x1
#define CU_STREAM_ADD_CAPTURE_DEPENDENCIES 0x0

/* Two captured streams writing one buffer: concurrent nodes unless joined by an event. */
void graph_branches(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc(), in2 = dalloc();
    CUevent fork = event(), dep = event(), join = event();
    CUgraph graph;
    CUgraphExec exec;
    CHECK(cuCtxSynchronize());
    CHECK(cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuEventRecord(fork, s1));
    CHECK(cuStreamWaitEvent(s2, fork, 0));
    launch(s1, x, in);
    if (fixed) {
        CHECK(cuEventRecord(dep, s1));
        CHECK(cuStreamWaitEvent(s2, dep, 0));
    }
    launch(s2, x, in2);
    CHECK(cuEventRecord(join, s2));
    CHECK(cuStreamWaitEvent(s1, join, 0));
    CHECK(cuStreamEndCapture(s1, &graph));
    CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    CHECK(cuGraphLaunch(exec, s1));
    CHECK(cuStreamSynchronize(s1));
}

/* NCCL's strong streams, when a program mixes graphs and eager calls: the capture waits,
   as an external wait, on an event that another stream records only later, before the graph
   is launched; each launch waits for the event as it then is. Racy twin: the event is never
   recorded, and the wait orders nothing. */
void capture_waits_on_a_later_event(int fixed) {
    CUstream live = nonblocking(), s = nonblocking();
    CUdeviceptr x = dalloc(), out = dalloc();
    CUevent e = event();
    CUgraph graph;
    CUgraphExec exec;
    CHECK(cuCtxSynchronize());
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuStreamWaitEvent(s, e, CU_EVENT_WAIT_EXTERNAL));
    launch(s, out, x);
    CHECK(cuStreamEndCapture(s, &graph));
    CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    writes(live, x);
    if (fixed) CHECK(cuEventRecord(e, live));
    CHECK(cuGraphLaunch(exec, s));
    CHECK(cuStreamSynchronize(s));
}

/* Work after a graph launch on another stream must wait for the launch. */
void graph_launch_order(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc();
    CUgraph graph;
    CUgraphExec exec;
    CHECK(cuCtxSynchronize());
    CHECK(cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    launch(s1, x, in);
    CHECK(cuStreamEndCapture(s1, &graph));
    CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    CHECK(cuGraphLaunch(exec, s1));
    if (fixed) order(s1, s2);
    reads(s2, x);
    CHECK(cuCtxSynchronize());
}

/* A kernel node scale(out, in) after `deps`. The parameters are copied by the driver. */
static CUgraphNode kernel_node(CUgraph g, const CUgraphNode *deps, size_t n, CUdeviceptr out, CUdeviceptr in) {
    CUgraphNode node;
    int count = N / 4;
    void *params[] = {&out, &in, &count};
    CUDA_KERNEL_NODE_PARAMS p = {scale, 1, 1, 1, 64, 1, 1, 0, params, NULL, NULL, NULL};
    CHECK(cuGraphAddKernelNode_v2(&node, g, deps, n, &p));
    return node;
}
/* Sets `node` (of a graph, or of `exec` when given) to scale(out, in). */
static void set_kernel_node(CUgraphExec exec, CUgraphNode node, CUdeviceptr out, CUdeviceptr in) {
    int count = N / 4;
    void *params[] = {&out, &in, &count};
    CUDA_KERNEL_NODE_PARAMS p = {scale, 1, 1, 1, 64, 1, 1, 0, params, NULL, NULL, NULL};
    if (exec)
        CHECK(cuGraphExecKernelNodeSetParams_v2(exec, node, &p));
    else
        CHECK(cuGraphKernelNodeSetParams_v2(node, &p));
}
/* Parameters of a memset node setting the N bytes of `x` to zero. */
static CUDA_MEMSET_NODE_PARAMS memset_params(CUdeviceptr x) {
    CUDA_MEMSET_NODE_PARAMS p = {x, N, 0, 1, N, 1};
    return p;
}

/* Two kernel nodes writing one buffer: concurrent unless an edge joins them. */
void built_graph_kernels(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph g;
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode a = kernel_node(g, NULL, 0, x, in);
    CUgraphNode b = kernel_node(g, NULL, 0, x, in2);
    if (fixed) CHECK(cuGraphAddDependencies(g, &a, &b, 1));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* A 3D copy's descriptor for the N bytes of x to y, in one row. */
static CUDA_MEMCPY3D linear_3d(CUdeviceptr y, CUdeviceptr x) {
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = x;
    c.srcPitch = N;
    c.srcHeight = 1;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = y;
    c.dstPitch = N;
    c.dstHeight = 1;
    c.WidthInBytes = N;
    c.Height = 1;
    c.Depth = 1;
    return c;
}

/* A memcpy node copying what a kernel node writes: after it only with the edge. */
void built_graph_memcpy_after_kernel(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc(), in = dalloc();
    CUgraph g;
    CUgraphNode copy;
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode k = kernel_node(g, NULL, 0, x, in);
    CUDA_MEMCPY3D c = linear_3d(y, x);
    CHECK(cuGraphAddMemcpyNode(&copy, g, fixed ? &k : NULL, fixed ? 1 : 0, &c, ctx_a));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* A memcpy node moved, after it was added, onto the buffer a concurrent kernel node writes
   (racy twin) or onto another (fixed twin); of the graph, or (`exec`) of its instantiation. */
static void memcpy_set_params(int fixed, int exec) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc(), z = dalloc(), in = dalloc(), out = dalloc();
    CUgraph g;
    CUgraphExec instantiated;
    CUgraphNode copy;
    CUDA_MEMCPY3D c = linear_3d(out, y);
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddMemcpyNode(&copy, g, NULL, 0, &c, ctx_a));
    kernel_node(g, NULL, 0, x, in);
    c = linear_3d(out, fixed ? z : x);
    if (exec) {
        CHECK(cuGraphInstantiateWithFlags(&instantiated, g, 0));
        CHECK(cuGraphExecMemcpyNodeSetParams(instantiated, copy, &c, ctx_a));
        CHECK(cuGraphLaunch(instantiated, s));
    } else {
        CHECK(cuGraphMemcpyNodeSetParams(copy, &c));
        run_graph(g, s);
    }
    CHECK(cuStreamSynchronize(s));
}
void built_graph_memcpy_set_params(int fixed) { memcpy_set_params(fixed, 0); }
void built_graph_exec_memcpy_set_params(int fixed) { memcpy_set_params(fixed, 1); }

/* A child graph's kernel and the parent's kernel write one buffer. */
void built_graph_child(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph child, g;
    CUgraphNode c;
    CHECK(cuGraphCreate(&child, 0));
    kernel_node(child, NULL, 0, x, in);
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode k = kernel_node(g, NULL, 0, x, in2);
    CHECK(cuGraphAddChildGraphNode(&c, g, fixed ? &k : NULL, fixed ? 1 : 0, child));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* An event record node after a kernel node: a stream that waits on the event reads what the
   kernel wrote. In the racy twin the record node does not follow the kernel node. */
void built_graph_event_record(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc();
    CUevent e = event();
    CUgraph g;
    CUgraphNode r;
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode k = kernel_node(g, NULL, 0, x, in);
    CHECK(cuGraphAddEventRecordNode(&r, g, fixed ? &k : NULL, fixed ? 1 : 0, e));
    run_graph(g, s1);
    CHECK(cuStreamWaitEvent(s2, e, 0));
    reads(s2, x);
    CHECK(cuCtxSynchronize());
}

/* An event wait node before a kernel node that reads what another stream wrote before
   recording the event. In the racy twin the kernel node does not follow the wait node. */
void built_graph_event_wait(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), out = dalloc();
    CUevent e = event();
    CUgraph g;
    CUgraphNode w;
    writes(s2, x);
    CHECK(cuEventRecord(e, s2));
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddEventWaitNode(&w, g, NULL, 0, e));
    kernel_node(g, fixed ? &w : NULL, fixed ? 1 : 0, out, x);
    run_graph(g, s1);
    CHECK(cuCtxSynchronize());
}

/* A memset node and a kernel node writing one buffer: concurrent unless an edge joins them. */
void built_graph_memset(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc();
    CUgraph g;
    CUgraphNode m;
    CUDA_MEMSET_NODE_PARAMS p = memset_params(x);
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddMemsetNode(&m, g, NULL, 0, &p, ctx_a));
    kernel_node(g, fixed ? &m : NULL, fixed ? 1 : 0, x, in);
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* A memset node of no bytes writes nothing: beside a kernel node writing x, a memset node of x
   N bytes wide (racy twin) or 0 (fixed twin). Stand-in only: a driver may refuse a node of no
   bytes. */
void built_graph_memset_of_no_bytes(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc();
    CUgraph g;
    CUgraphNode m;
    CUDA_MEMSET_NODE_PARAMS p = memset_params(x);
    if (fixed) p.width = 0;
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddMemsetNode(&m, g, NULL, 0, &p, ctx_a));
    kernel_node(g, NULL, 0, x, in);
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* A memset node moved onto the buffer a concurrent kernel node writes (racy twin), or onto
   another buffer (fixed twin), after it was added. */
void built_graph_memset_set_params(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc(), z = dalloc(), in = dalloc();
    CUgraph g;
    CUgraphNode m;
    CUDA_MEMSET_NODE_PARAMS p = memset_params(y);
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddMemsetNode(&m, g, NULL, 0, &p, ctx_a));
    kernel_node(g, NULL, 0, x, in);
    p = memset_params(fixed ? z : x);
    CHECK(cuGraphMemsetNodeSetParams(m, &p));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* Two concurrent kernel nodes writing two buffers; the second is then set to write the first's
   buffer (racy twin) or a third (fixed twin). */
void built_graph_kernel_set_params(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc(), z = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph g;
    CHECK(cuGraphCreate(&g, 0));
    kernel_node(g, NULL, 0, x, in);
    CUgraphNode b = kernel_node(g, NULL, 0, y, in2);
    set_kernel_node(NULL, b, fixed ? z : x, in2);
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* The same, with the node of the instantiated graph set. */
void built_graph_exec_kernel_set_params(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc(), z = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph g;
    CUgraphExec exec;
    CHECK(cuGraphCreate(&g, 0));
    kernel_node(g, NULL, 0, x, in);
    CUgraphNode b = kernel_node(g, NULL, 0, y, in2);
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    set_kernel_node(exec, b, fixed ? z : x, in2);
    CHECK(cuGraphLaunch(exec, s));
    CHECK(cuStreamSynchronize(s));
}

/* An executable graph of two kernel nodes writing two buffers, updated (through the first
   version of the call when `v1`) from a graph of the same shape whose second node writes the
   first's buffer (racy twin) or a third (fixed twin). */
static void exec_update(int fixed, int v1) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc(), z = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph g, update;
    CUgraphExec exec;
    CUgraphExecUpdateResultInfo info;
    CUgraphNode error_node;
    int result;
    CHECK(cuGraphCreate(&g, 0));
    kernel_node(g, NULL, 0, x, in);
    kernel_node(g, NULL, 0, y, in2);
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    CHECK(cuGraphCreate(&update, 0));
    kernel_node(update, NULL, 0, x, in);
    kernel_node(update, NULL, 0, fixed ? z : x, in2);
    if (v1)
        CHECK(cuGraphExecUpdate(exec, update, &error_node, &result));
    else
        CHECK(cuGraphExecUpdate_v2(exec, update, &info));
    CHECK(cuGraphLaunch(exec, s));
    CHECK(cuStreamSynchronize(s));
}
void built_graph_exec_update(int fixed) { exec_update(fixed, 0); }
void built_graph_exec_update_v1(int fixed) { exec_update(fixed, 1); }

/* Kernel nodes a -> c -> b writing one buffer, c empty. Destroying c takes its edges with it
   and leaves a and b concurrent (racy twin); destroying b takes its accesses (fixed twin). */
void built_graph_destroy_node(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph g;
    CUgraphNode c;
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode a = kernel_node(g, NULL, 0, x, in);
    CHECK(cuGraphAddEmptyNode(&c, g, &a, 1));
    CUgraphNode b = kernel_node(g, &c, 1, x, in2);
    CHECK(cuGraphDestroyNode(fixed ? b : c));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* A clone of a graph whose kernel node writes a buffer, with a kernel node added to the clone
   writing the same buffer (racy twin) or another (fixed twin). */
void built_graph_clone(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), z = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph g, clone;
    CHECK(cuGraphCreate(&g, 0));
    kernel_node(g, NULL, 0, x, in);
    CHECK(cuGraphClone(&clone, g));
    kernel_node(clone, NULL, 0, fixed ? z : x, in2);
    run_graph(clone, s);
    CHECK(cuStreamSynchronize(s));
}

/* A capture into a graph that already holds a kernel node writing the buffer the captured
   launch writes: after that node only when the capture starts from it. */
void capture_to_graph(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph g, captured;
    CHECK(cuCtxSynchronize());
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode a = kernel_node(g, NULL, 0, x, in);
    CHECK(cuStreamBeginCaptureToGraph(s, g, fixed ? &a : NULL, NULL, fixed ? 1 : 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
    launch(s, x, in2);
    CHECK(cuStreamEndCapture(s, &captured));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* A capture into a graph, started from an empty node, whose next launch is made (through the
   second version of the call when `v2`) to depend on the graph's kernel node writing the same
   buffer (fixed twin) or on the empty node again. */
static void update_capture_dependencies(int fixed, int v2) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph g, captured;
    CUgraphNode e;
    CHECK(cuCtxSynchronize());
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode a = kernel_node(g, NULL, 0, x, in);
    CHECK(cuGraphAddEmptyNode(&e, g, NULL, 0));
    CHECK(cuStreamBeginCaptureToGraph(s, g, &e, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    if (v2)
        CHECK(cuStreamUpdateCaptureDependencies_v2(s, fixed ? &a : &e, NULL, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    else
        CHECK(cuStreamUpdateCaptureDependencies(s, fixed ? &a : &e, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    launch(s, x, in2);
    CHECK(cuStreamEndCapture(s, &captured));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}
void capture_update_dependencies(int fixed) { update_capture_dependencies(fixed, 0); }
void capture_update_dependencies_v2(int fixed) { update_capture_dependencies(fixed, 1); }

/* A mem alloc node's memory written by a kernel node: before the allocation unless the kernel
   node follows the alloc node. */
static CUgraphNode alloc_node(CUgraph g, const CUgraphNode *deps, size_t n, CUdeviceptr *dptr) {
    CUgraphNode node;
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = 0;
    p.bytesize = N;
    CHECK(cuGraphAddMemAllocNode(&node, g, deps, n, &p));
    *dptr = p.dptr;
    return node;
}
void built_graph_mem_alloc(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr p, in = dalloc();
    CUgraph g;
    CUgraphNode done[2];
    CHECK(cuGraphCreate(&g, 0));
    done[0] = alloc_node(g, NULL, 0, &p);
    done[1] = kernel_node(g, fixed ? done : NULL, fixed ? 1 : 0, p, in);
    CUgraphNode f;
    CHECK(cuGraphAddMemFreeNode(&f, g, done, 2, p));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* A mem free node freeing what a kernel node writes: after it only with the edge. */
void built_graph_mem_free(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr p, in = dalloc();
    CUgraph g;
    CUgraphNode f;
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode a = alloc_node(g, NULL, 0, &p);
    CUgraphNode k = kernel_node(g, &a, 1, p, in);
    CHECK(cuGraphAddMemFreeNode(&f, g, fixed ? &k : &a, 1, p));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* A refused instantiation tells the model nothing either: instantiating no graph into the
   executable graph of a kernel node writing x leaves it that graph, whose launch on s2 meets s1's
   write of x. Stand-in only: a real driver is only required to refuse it. */
void refused_instantiate(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc();
    CUgraph g;
    CUgraphExec exec;
    CHECK(cuGraphCreate(&g, 0));
    kernel_node(g, NULL, 0, x, in);
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    writes(s1, x);
    CUresult status = cuGraphInstantiateWithFlags(&exec, NULL, 0);
    if (status == CUDA_SUCCESS) fprintf(stderr, "unexpected status %d\n", status);
    order_if(fixed, s1, s2);
    CHECK(cuGraphLaunch(exec, s2));
    CHECK(cuCtxSynchronize());
}
