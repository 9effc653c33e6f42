#!/usr/bin/env python3
"""torch.distributed's gloo all_reduce at the sizes of `weft bench comm`,
for a side-by-side comparison. PyTorch 2.x from `make bench-deps`:
    .venv-bench/bin/python3 bench/comm/torch_allreduce.py [NRANKS] [MAX_BYTES]
Same protocol: float32 sum, 5 warm-up + 20 timed iterations, slowest rank's
time, busbw = algbw * 2 (n - 1) / n."""
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, size, init_file, max_bytes):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=size)
    if rank == 0:
        print("#%12s %13s %10s %8s %8s" % ("size(B)", "count", "time(us)", "algbw", "busbw"))
    nbytes = 8
    while nbytes <= max_bytes:
        x = torch.full((nbytes // 4,), float(rank + 1), dtype=torch.float32)
        for _ in range(5):
            dist.all_reduce(x)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(20):
            dist.all_reduce(x)
        t = torch.tensor([(time.perf_counter() - t0) / 20], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        secs = t.item()
        algbw = nbytes / secs / 1e9
        if rank == 0:
            print(" %12d %13d %10.1f %8.2f %8.2f" % (nbytes, nbytes // 4, secs * 1e6, algbw,
                                                      algbw * 2 * (size - 1) / size), flush=True)
        nbytes *= 2
    dist.destroy_process_group()


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    max_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else 64 << 20
    fd, path = tempfile.mkstemp(prefix="weft-torch-bench-")
    os.close(fd)
    os.unlink(path)
    mp.spawn(worker, args=(n, path, max_bytes), nprocs=n)
