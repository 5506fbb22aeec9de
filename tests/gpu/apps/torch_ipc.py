# PyTorch: a CUDA tensor sent to another process through a torch.multiprocessing queue (the
# spawn start method). PyTorch sends the tensor's memory as a CUDA IPC handle and an IPC
# event it recorded on the producer's current stream; the consumer's rebuild waits on the
# opened event on its own current stream before the tensor is used. Correct as PyTorch does
# it ("clean"). Racy ("producer_writes_again"): after sending, the producer writes the tensor
# again on a side stream (ordered after its own first write) while the consumer reads it: the
# event the consumer waits on was recorded on the producer's current stream, which knows
# nothing of the side stream's write.
# With a second argument, the consumer reads the tensor from another GPU (a peer copy to
# cuda:1) instead of on the producer's.
# Usage: torch_ipc.py clean|producer_writes_again [peer]
import sys

import torch
import torch.multiprocessing as mp

N = 1 << 22


def consumer(tensors, done, peer):
    x = tensors.get()                  # opens the handles, waits on the IPC event
    read = x.to("cuda:1") if peer else x * 2   # reads x on the consumer's current stream
    total = read.sum().item()
    del x, read
    done.put(total)


def main(mode, peer):
    ctx = mp.get_context("spawn")
    tensors, done = ctx.Queue(), ctx.Queue()
    worker = ctx.Process(target=consumer, args=(tensors, done, peer))
    worker.start()
    x = torch.full((N,), 1.0, device="cuda")
    tensors.put(x)
    if mode == "producer_writes_again":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())   # ordered after the first write here
        with torch.cuda.stream(side):
            for _ in range(20):
                x.add_(1.0)
    done.get()                         # the consumer read and dropped the tensor
    worker.join()
    torch.cuda.synchronize()
    print("torch_ipc:", mode, *(["peer"] if peer else []), "done")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] == ["peer"])
