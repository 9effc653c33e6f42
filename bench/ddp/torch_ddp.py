#!/usr/bin/env python3
"""The PyTorch side of bench/ddp: torch.nn.parallel.DistributedDataParallel
over gloo, N processes on this machine with one thread each, the same GPT
(nanoGPT's model from tests/fixtures/models/torch_ref.py, float32, attention
through F.scaled_dot_product_attention), AdamW (lr 1e-4, weight decay 0.1
on the tensors of 2 or more dimensions, as bench_ddp's; PyTorch picks its
CPU implementation), batch per rank and steps as bench_ddp. Times every
step after warm-up (the slowest rank's), prints the median and tokens/s.

    .venv-bench/bin/python3 bench/ddp/torch_ddp.py [--shape gpt-mini|gpt-small-cpu]
        [--ranks N] [--steps S] [--warmup W] [--bucket-cap-mb X] [--compile]
        [--attention sdpa|manual]

--compile wraps the DDP model in torch.compile (inductor, with DDP's graph
splitting at bucket boundaries); compilation happens in the warm-up steps.
When it fails the output says why and RESULT carries failed=1.
Run it with the interpreter `make bench-deps` sets up (.venv-bench/,
PyTorch 2.x from PyPI). The last line is "RESULT impl=torch ...
tokens_per_s=..." (impl=torch_compile with --compile).
"""
import argparse
import os
import socket
import sys
import time
import traceback

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
    torch_ref.USE_SDPA = a.attention == "sdpa"
    torch.manual_seed(1)
    model = torch.nn.parallel.DistributedDataParallel(torch_ref.GPT(cfg),
                                                      bucket_cap_mb=a.bucket_cap_mb)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=1e-4)
    step_model = torch.compile(model) if a.compile else model
    g = torch.Generator().manual_seed(100 + rank)
    times, cpus, loss, warm = [], [], None, 0.0
    for s in range(-a.warmup, a.steps):
        idx = torch.randint(0, cfg["vocab_size"], (B, T), generator=g)
        tgt = torch.randint(0, cfg["vocab_size"], (B, T), generator=g)
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            opt.zero_grad(set_to_none=True)
            _, loss = step_model(idx, tgt)
            loss.backward()
            opt.step()
        except Exception as e:  # noqa: BLE001 - torch.compile's failures have many types
            if not a.compile:
                raise
            first = (str(e).strip().splitlines() or [""])[0][:300]
            traceback.print_exc(limit=3, file=sys.stderr)
            q.put((rank, None, f"{type(e).__name__}: {first}", None))
            os._exit(0)  # the other ranks may wait in a collective: the parent ends them
        if s >= 0:
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        else:
            warm += time.perf_counter() - t0
    q.put((rank, times, loss.item(), cpus, warm))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="gpt-mini", choices=sorted(SHAPES))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--compile", action="store_true", help="torch.compile the DDP model")
    ap.add_argument("--attention", default="sdpa", choices=["manual", "sdpa"])
    a = ap.parse_args()
    impl = "torch_compile" if a.compile else "torch"
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, a, port, q)) for r in range(a.ranks)]
    for p in procs:
        p.start()
    got = []
    for _ in procs:
        got.append(q.get())
        if got[-1][1] is not None:
            continue
        # torch.compile failed on a rank: say why, end the others (they may
        # wait in a collective for it)
        why = got[-1][2]
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
        print(f"torch {torch.__version__} ddp {a.shape}: torch.compile failed on this machine: "
              f"{why}")
        print(f"RESULT impl={impl} shape={a.shape} ranks={a.ranks} failed=1 "
              f"torch={torch.__version__} reason={why!r}")
        return
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
    warm = max(t[4] for t in got)
    what = "torch.compile (inductor)" if a.compile else "eager"
    print(f"torch {torch.__version__} {what} ddp {a.shape}: {a.ranks} ranks x 1 thread, gloo, "
          f"attention {a.attention}, adamw, {a.steps} timed steps (median of the slowest rank), "
          f"final loss {loss:.4f}; warm-up {warm:.1f} s")
    print(f"step {med * 1e3:.1f} ms, {tok_s:.0f} tokens/s")
    print(f"fastest step {steps[0] * 1e3:.1f} ms; CPU per step per rank {cpu * 1e3:.1f} ms "
          f"({tok_cpu:.0f} tokens per CPU-second per rank-core)")
    print(f"RESULT impl={impl} shape={a.shape} ranks={a.ranks} tokens_per_s={tok_s:.1f} "
          f"step_ms={med * 1e3:.2f} min_step_ms={steps[0] * 1e3:.2f} cpu_ms={cpu * 1e3:.2f} "
          f"tokens_per_cpu_s={tok_cpu:.1f} torch={torch.__version__} warmup_s={warm:.2f}")


if __name__ == "__main__":
    main()
