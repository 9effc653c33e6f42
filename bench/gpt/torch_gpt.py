#!/usr/bin/python3
"""The PyTorch side of bench/gpt: the same GPT (nanoGPT's model from
tests/fixtures/models/torch_ref.py, float32, eager, the manual attention
nanoGPT uses on torch < 2.0) and the same step as bench_gpt: forward,
backward, a plain SGD update, timed over several steps after warm-up.

    /usr/bin/python3 bench/gpt/torch_gpt.py [--shape gpt-small-cpu|gpt-tiny|gpt2-124m]
                                            [--threads N] [--steps S] [--warmup W]
                                            [--device cuda] [--precision bf16-mixed]
                                            [--attention manual|sdpa] [--batch B]

Run it with Debian's python3-torch (/usr/bin/python3) on the CPU; with
--device cuda, with a python3 whose torch has CUDA (scripts/gpu-check part
8 does). The last line is "RESULT impl=torch ... tokens_per_s=...".
"""
import argparse
import os
import sys
import time

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
    # GPT-2 small as bench_gpt --shape gpt2-124m (scripts/gpu-check part 8)
    "gpt2-124m": (dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, block_size=1024,
                       bias=True, dropout=0.0), 8),
}



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="gpt-small-cpu", choices=sorted(SHAPES))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--precision", default="32-true", choices=["32-true", "bf16-mixed"],
                    help="bf16-mixed: torch.autocast to bfloat16 (F32 parameters)")
    ap.add_argument("--attention", default="manual", choices=["manual", "sdpa"],
                    help="torch_ref's materialized attention (manual, as weft's kernels) "
                         "or torch's fused SDPA (torch >= 2.0)")
    ap.add_argument("--batch", type=int, default=0, help="batch size (0: the shape's)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg, B = SHAPES[a.shape]
    B = a.batch or B
    T = cfg["block_size"]
    dev = torch.device(a.device)
    if a.attention == "sdpa" and not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        sys.exit(f"torch_gpt.py: --attention sdpa needs torch >= 2.0 (this is {torch.__version__})")
    torch_ref.USE_SDPA = a.attention == "sdpa"
    torch.manual_seed(1)
    model = torch_ref.GPT(cfg).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    i = torch.arange(B * T, dtype=torch.int64)
    idx = ((i * 2654435761) % cfg["vocab_size"]).view(B, T).to(dev)
    tgt = ((i * 40503 + 7) % cfg["vocab_size"]).view(B, T).to(dev)
    amp = a.precision == "bf16-mixed"
    times, cpu = [], []
    for s in range(-a.warmup, a.steps):
        t0 = time.perf_counter()
        c0 = time.process_time()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp):
            _, loss = model(idx, tgt)
        loss.backward()
        opt.step()
        lv = loss.item()  # waits for the device
        if s >= 0:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    times.sort()
    cpu.sort()
    med = times[len(times) // 2]
    cpu_med = cpu[len(cpu) // 2]
    tok_s = B * T / med
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, {a.steps} timed "
          f"steps (median), loss {lv:.4f}")
    print(f"step {med * 1e3:.1f} ms (min {times[0] * 1e3:.1f}, max {times[-1] * 1e3:.1f}), "
          f"{tok_s:.0f} tokens/s")
    print(f"cpu time per step {cpu_med * 1e3:.1f} ms (median; all threads), "
          f"{B * T / cpu_med:.0f} tokens per cpu-second")
    print(f"RESULT impl=torch shape={a.shape} threads={a.threads} tokens_per_s={tok_s:.1f} "
          f"step_ms={med * 1e3:.2f} min_step_ms={times[0] * 1e3:.2f} cpu_ms={cpu_med * 1e3:.2f} "
          f"device={a.device} precision={a.precision} attention={a.attention} batch={B}")


if __name__ == "__main__":
    main()
