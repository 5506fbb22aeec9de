/* What is not followed (docs/semantics.md#what-is-not-followed): notes, not races. */
#include "semantics.h"

/* A stream destroyed with work pending, and a graph holding a batch memory operation node
   (whose effect streamsan does not follow): two notes, no race. Both twins are the same
   program. */
void notes(int fixed) {
    (void)fixed;
    CUstream s = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    CUgraph graph;
    CUgraphExec exec;
    writes(s, x);
    CHECK(cuStreamDestroy_v2(s));
    CUgraphNode node;
    CUstreamBatchMemOpParams op;
    memset(&op, 0, sizeof op);
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    op.writeValue.address = x;
    op.writeValue.value = 1;
    CUDA_BATCH_MEM_OP_NODE_PARAMS params = {ctx_a, 1, &op, 0};
    CHECK(cuGraphCreate(&graph, 0));
    CHECK(cuGraphAddBatchMemOpNode(&node, graph, NULL, 0, &params));
    CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    CHECK(cuGraphLaunch(exec, s2));
    CHECK(cuStreamSynchronize(s2));
}
