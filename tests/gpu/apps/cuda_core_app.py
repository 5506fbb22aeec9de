# cuda.core with its stream-ordered memory resource: buffers allocated on one stream, used on
# another, freed on the first.
# Usage: cuda_core_app.py clean|free_without_wait|use_before_alloc
import sys
import numpy as np
try:
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
except ImportError:
    from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch

CODE = r'''
extern "C" __global__ void scale(float* out, const float* in, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}
'''
mode = sys.argv[1]
dev = Device()
dev.set_current()
alloc_stream, work_stream = dev.create_stream(), dev.create_stream()
arch = "".join(str(v) for v in dev.compute_capability)
kernel = Program(CODE, code_type="c++", options=ProgramOptions(arch=f"sm_{arch}")).compile("cubin").get_kernel("scale")
n = 1 << 16
config = LaunchConfig(grid=n // 256, block=256)
out = dev.allocate(n * 4, stream=work_stream)
for step in range(10):
    tmp = dev.allocate(n * 4, stream=alloc_stream)
    if mode != "use_before_alloc":
        work_stream.wait(alloc_stream.record())
    launch(work_stream, config, kernel, out, tmp, np.uint64(n))
    if mode != "free_without_wait":
        alloc_stream.wait(work_stream.record())
    tmp.close(alloc_stream)
work_stream.sync()
alloc_stream.sync()
print("cuda_core_app:", mode, "done")
