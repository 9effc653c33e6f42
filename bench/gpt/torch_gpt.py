#!/usr/bin/env python3
"""The PyTorch side of bench/gpt: the same GPT (nanoGPT's model from
tests/fixtures/models/torch_ref.py, float32) and the same step as
bench_gpt: forward, backward and an AdamW update (nanoGPT's: lr 6e-4,
betas 0.9/0.95, weight decay 0.1 on the tensors of 2 or more dimensions;
PyTorch picks its own CPU implementation, for-loop, foreach or fused), timed
over several steps after warm-up.

    .venv-bench/bin/python3 bench/gpt/torch_gpt.py
        [--shape gpt-small-cpu|gpt-tiny|gpt2-124m] [--threads N] [--steps S]
        [--warmup W] [--device cuda] [--precision bf16-mixed]
        [--attention sdpa|manual] [--batch B] [--compile] [--optimizer adamw|sgd]

Attention is F.scaled_dot_product_attention by default (what nanoGPT runs on
torch >= 2.0); --attention manual materializes the scores as torch_ref's
fixtures do. --compile wraps the model in torch.compile (inductor); its
compilation happens in the warm-up steps and is reported apart. When it
fails, the output says so and why, and the RESULT line carries failed=1.
On a GPU the default optimizer is a plain SGD update (lr 1e-3), as
bench_gpt's there.

Run it with the interpreter `make bench-deps` sets up (.venv-bench/, PyTorch
2.x from PyPI). The last line is "RESULT impl=torch ... tokens_per_s=..."
(impl=torch_compile with --compile).
"""
import argparse
import os
import sys
import time
import traceback

sys.dont_write_bytecode = True
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "fixtures", "models"))
import torch_ref  # noqa: E402

SHAPES = {
    "gpt-small-cpu": (dict(n_layer=6, n_head=6, n_embd=384, vocab_size=256, block_size=256,
                           bias=True, dropout=0.0), 4),
    "gpt-tiny": (dict(n_layer=2, n_head=4, n_embd=128, vocab_size=256, block_size=64,
                      bias=True, dropout=0.0), 4),
    # GPT-2 small as bench_gpt --shape gpt2-124m (scripts/gpu-check part 4)
    "gpt2-124m": (dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, block_size=1024,
                       bias=True, dropout=0.0), 8),
}


def make_optimizer(model, name):
    """nanoGPT's AdamW groups (decay on 2-D and larger tensors), or SGD."""
    params = [p for p in model.parameters() if p.requires_grad]
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3)
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8)


def adamw_impl(opt):
    """Which AdamW implementation PyTorch runs: the constructor's choice
    (fused / foreach) or, when left to PyTorch (None), what its default
    picks for these tensors."""
    g = opt.param_groups[0]
    if g.get("fused"):
        return "fused"
    if g.get("foreach"):
        return "foreach"
    if g.get("foreach") is None and g.get("fused") is None:
        try:
            from torch.optim.optimizer import _default_to_fused_or_foreach
            fused, foreach = _default_to_fused_or_foreach(list(g["params"]), False, False)
            return "fused (default)" if fused else "foreach (default)" if foreach \
                else "for-loop (default)"
        except (ImportError, TypeError):
            return "PyTorch's default"
    return "for-loop"


def fail_line(a, why):
    return (f"RESULT impl=torch_compile shape={a.shape} threads={a.threads} failed=1 "
            f"torch={torch.__version__} reason={why!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="gpt-small-cpu", choices=sorted(SHAPES))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--precision", default="32-true", choices=["32-true", "bf16-mixed"],
                    help="bf16-mixed: torch.autocast to bfloat16 (F32 parameters)")
    ap.add_argument("--attention", default="sdpa", choices=["manual", "sdpa"],
                    help="torch's fused SDPA (torch >= 2.0, the default) or torch_ref's "
                         "materialized attention (manual, as weft's kernels)")
    ap.add_argument("--batch", type=int, default=0, help="batch size (0: the shape's)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--optimizer", default="", choices=["", "adamw", "sgd"],
                    help="adamw (the CPU default) or sgd (the GPU default)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg, B = SHAPES[a.shape]
    B = a.batch or B
    T = cfg["block_size"]
    dev = torch.device(a.device)
    optim = a.optimizer or ("adamw" if dev.type == "cpu" else "sgd")
    impl = "torch_compile" if a.compile else "torch"
    if a.attention == "sdpa" and not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        sys.exit(f"torch_gpt.py: --attention sdpa needs torch >= 2.0 (this is {torch.__version__});"
                 f" run `make bench-deps` and use .venv-bench/bin/python3")
    torch_ref.USE_SDPA = a.attention == "sdpa"
    torch.manual_seed(1)
    model = torch_ref.GPT(cfg).to(dev)
    opt = make_optimizer(model, optim)
    step_model = model
    if a.compile:
        if not hasattr(torch, "compile"):
            print(f"torch.compile: not available in torch {torch.__version__}")
            print(fail_line(a, "torch.compile needs torch >= 2.0"))
            return
        step_model = torch.compile(model)
    i = torch.arange(B * T, dtype=torch.int64)
    idx = ((i * 2654435761) % cfg["vocab_size"]).view(B, T).to(dev)
    tgt = ((i * 40503 + 7) % cfg["vocab_size"]).view(B, T).to(dev)
    amp = a.precision == "bf16-mixed"
    times, cpu, warm_s = [], [], 0.0
    for s in range(-a.warmup, a.steps):
        t0 = time.perf_counter()
        c0 = time.process_time()
        try:
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp):
                _, loss = step_model(idx, tgt)
            loss.backward()
            opt.step()
            lv = loss.item()  # waits for the device
        except Exception as e:  # noqa: BLE001 - torch.compile's failures have many types
            if not a.compile:
                raise
            first = (str(e).strip().splitlines() or [""])[0][:300]
            why = f"{type(e).__name__}: {first}"
            print(f"torch.compile failed on this machine (torch {torch.__version__}): {why}")
            traceback.print_exc(limit=3, file=sys.stderr)
            print(fail_line(a, why))
            return
        if s >= 0:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        else:
            warm_s += time.perf_counter() - t0
    times.sort()
    cpu.sort()
    med = times[len(times) // 2]
    cpu_med = cpu[len(cpu) // 2]
    tok_s = B * T / med
    what = "torch.compile (inductor)" if a.compile else "eager"
    print(f"torch {torch.__version__} {what}, threads {torch.get_num_threads()}, attention "
          f"{a.attention}, {optim}" + (f" ({adamw_impl(opt)})" if optim == "adamw" else "") +
          f", {a.steps} timed steps (median), loss {lv:.4f}")
    if a.compile:
        print(f"warm-up ({a.warmup} steps, compilation included) {warm_s:.1f} s")
    print(f"step {med * 1e3:.1f} ms (min {times[0] * 1e3:.1f}, max {times[-1] * 1e3:.1f}), "
          f"{tok_s:.0f} tokens/s")
    print(f"cpu time per step {cpu_med * 1e3:.1f} ms (median; all threads), "
          f"{B * T / cpu_med:.0f} tokens per cpu-second")
    print(f"RESULT impl={impl} shape={a.shape} threads={a.threads} tokens_per_s={tok_s:.1f} "
          f"step_ms={med * 1e3:.2f} min_step_ms={times[0] * 1e3:.2f} cpu_ms={cpu_med * 1e3:.2f} "
          f"device={a.device} precision={a.precision} attention={a.attention} batch={B} "
          f"optimizer={optim} torch={torch.__version__} warmup_s={warm_s:.2f}")


if __name__ == "__main__":
    main()
