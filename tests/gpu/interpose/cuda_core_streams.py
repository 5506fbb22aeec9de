# cuda.core with its stream-ordered memory resource: each round allocates on s1, launches on
# s1 and s2 ordered by events, frees on s1. Usage: cuda_core_streams.py ROUNDS
import json, sys
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

rounds = int(sys.argv[1])
dev = Device()
dev.set_current()
s1, s2 = dev.create_stream(), dev.create_stream()
arch = "".join(str(v) for v in dev.compute_capability)
kernel = Program(CODE, code_type="c++", options=ProgramOptions(arch=f"sm_{arch}")).compile("cubin").get_kernel("scale")
n = 1 << 16
config = LaunchConfig(grid=n // 256, block=256)
src = dev.allocate(n * 4, stream=s1)
dst = dev.allocate(n * 4, stream=s1)
for _ in range(rounds):
    tmp = dev.allocate(n * 4, stream=s1)                  # one allocation
    launch(s1, config, kernel, tmp, src, np.uint64(n))     # one launch
    s2.wait(s1.record())                                   # one record, one wait
    launch(s2, config, kernel, dst, tmp, np.uint64(n))     # one launch
    s1.wait(s2.record())                                   # one record, one wait
    tmp.close(s1)                                          # one free
s1.sync()
print("cuda_core_streams:", rounds, "rounds done")
print("EXPECT", json.dumps({"launch": 2, "alloc": 1, "free": 1, "event_record": 2, "wait": 2}))
