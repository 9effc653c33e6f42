#!/usr/bin/python3
"""The PyTorch side of bench/ddp: torch.nn.parallel.DistributedDataParallel
over gloo, N processes on this machine with one thread each, the same GPT
(nanoGPT's model from tests/fixtures/models/torch_ref.py, float32, eager),
AdamW, batch per rank and steps as bench_ddp. Times every step after
warm-up (the slowest rank's), prints the median and tokens/s.

    /usr/bin/python3 bench/ddp/torch_ddp.py [--shape gpt-mini|gpt-small-cpu]
        [--ranks N] [--steps S] [--warmup W] [--bucket-cap-mb X]

Run it with Debian's python3-torch (/usr/bin/python3). The last line is
"RESULT impl=torch ... tokens_per_s=...".
"""
import argparse
import os
import socket
import sys
import time

sys.dont_write_bytecode = True
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "fixtures", "models"))
import torch_ref  # noqa: E402

SHAPES = {
    "gpt-mini": (dict(n_layer=4, n_head=4, n_embd=128, vocab_size=256, block_size=128,
                      bias=True, dropout=0.0), 8),
    "gpt-small-cpu": (dict(n_layer=6, n_head=6, n_embd=384, vocab_size=256, block_size=256,
                           bias=True, dropout=0.0), 4),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(rank, a, port, q):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    cfg, B = SHAPES[a.shape]
    T = cfg["block_size"]
    torch.manual_seed(1)
    model = torch.nn.parallel.DistributedDataParallel(torch_ref.GPT(cfg),
                                                      bucket_cap_mb=a.bucket_cap_mb)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    g = torch.Generator().manual_seed(100 + rank)
    times, cpus, loss = [], [], None
    for s in range(-a.warmup, a.steps):
        idx = torch.randint(0, cfg["vocab_size"], (B, T), generator=g)
        tgt = torch.randint(0, cfg["vocab_size"], (B, T), generator=g)
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        _, loss = model(idx, tgt)
        loss.backward()
        opt.step()
        if s >= 0:
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
    q.put((rank, times, loss.item(), cpus))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="gpt-mini", choices=sorted(SHAPES))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    a = ap.parse_args()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, a, port, q)) for r in range(a.ranks)]
    for p in procs:
        p.start()
    got = [q.get() for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode:
            sys.exit(f"torch_ddp: a rank exited with {p.exitcode}")
    steps = sorted(max(t[1][s] for t in got) for s in range(a.steps))
    cpus = sorted(max(t[3][s] for t in got) for s in range(a.steps))
    med, cpu = steps[len(steps) // 2], cpus[len(cpus) // 2]
    cfg, B = SHAPES[a.shape]
    tok_s = a.ranks * B * cfg["block_size"] / med
    tok_cpu = a.ranks * B * cfg["block_size"] / cpu
    loss = [t[2] for t in got if t[0] == 0][0]
    print(f"torch {torch.__version__} ddp {a.shape}: {a.ranks} ranks x 1 thread, gloo, "
          f"{a.steps} timed steps (median of the slowest rank), final loss {loss:.4f}")
    print(f"step {med * 1e3:.1f} ms, {tok_s:.0f} tokens/s")
    print(f"fastest step {steps[0] * 1e3:.1f} ms; CPU per step per rank {cpu * 1e3:.1f} ms "
          f"({tok_cpu:.0f} tokens per CPU-second per rank-core)")
    print(f"RESULT impl=torch shape={a.shape} ranks={a.ranks} tokens_per_s={tok_s:.1f} "
          f"step_ms={med * 1e3:.2f} min_step_ms={steps[0] * 1e3:.2f} cpu_ms={cpu * 1e3:.2f} "
          f"tokens_per_cpu_s={tok_cpu:.1f}")


if __name__ == "__main__":
    main()
