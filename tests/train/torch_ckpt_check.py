#!/usr/bin/python3
"""A checkpoint the trainer wrote loads into PyTorch's nanoGPT reference
(tests/fixtures/models/torch_ref.py: nanoGPT's names and layout, tanh GELU,
lm_head tied to wte) and gives the loss `weft validate` prints for it on the
same batch.

tests/nn/test_nn_export already checks a model.safetensors that core/nn
wrote directly; this is the trainer's angle: a bias-free GPT trained by
`weft fit` for 20 steps (AdamW, so the weights are far from their
initialisation and any misnamed or transposed tensor shows), its
checkpoints/last/model.safetensors, and the first validation batch rebuilt
here the way core/data does it (the last floor(n * val_fraction) bytes,
consecutive windows of block_size + 1 bytes from offset 0).

Tolerance: 1e-5 relative. PyTorch runs in float64; weft's float32 forward of
this 2-layer model is within ~1e-6 relative, and `weft validate` prints 6
decimals (2e-7 relative at a loss of ~3), so only a wrong weight, shape or
batch breaks it.

Exit 77 (ctest's skip) when python3-torch is not importable.
"""
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
try:
    import torch
except ImportError:
    print("skipped: python3-torch is not importable by", sys.executable,
          "(apt-get install python3-torch)")
    sys.exit(77)

SRC = os.environ.get("WEFT_SOURCE_DIR", ".")
WEFT = os.path.join(os.environ["WEFT_BUILD_DIR"], "bin", "weft")
sys.path.insert(0, os.path.join(SRC, "tests", "fixtures", "models"))
import torch_ref  # noqa: E402

CFG = dict(n_layer=2, n_head=2, n_embd=32, vocab_size=256, block_size=32, bias=False,
           dropout=0.0)
B, VAL_FRACTION = 4, 0.1

YAML = f"""seed_everything: 11
trainer:
  max_steps: 20
  limit_val_batches: 1
  enable_progress_bar: false
model: {{class: gpt, n_layer: {CFG['n_layer']}, n_head: {CFG['n_head']}, n_embd: {CFG['n_embd']},
        vocab_size: 256, block_size: {CFG['block_size']}, bias: false, dropout: 0.0}}
data: {{class: text, paths: [corpus.txt], block_size: {CFG['block_size']}, batch_size: {B},
       val_fraction: {VAL_FRACTION}, batches_per_epoch: 10}}
optimizer: {{name: adamw, lr: 3.0e-3}}
"""


def weft(workdir, *args):
    r = subprocess.run([WEFT, *args], cwd=workdir, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: weft {' '.join(args)} exited {r.returncode}:\n{r.stderr}")
    return r.stdout


def main():
    work = tempfile.mkdtemp(prefix="weft_train_torch.")
    try:
        rng = random.Random(5)
        words = "the quick brown fox jumps over a lazy dog while weft and warp cross".split()
        text = " ".join(rng.choice(words) for _ in range(4000)).encode()
        with open(os.path.join(work, "corpus.txt"), "wb") as f:
            f.write(text)
        with open(os.path.join(work, "gpt.yaml"), "w") as f:
            f.write(YAML)
        weft(work, "fit", "--config", "gpt.yaml")
        ckpt = "runs/gpt/version_0/checkpoints/last"
        out = weft(work, "validate", "--config", "gpt.yaml", "--ckpt", ckpt)
        m = re.search(r"^val_loss (\S+)$", out, re.M)
        if not m:
            sys.exit(f"FAIL: no val_loss line in weft validate's output:\n{out}")
        got = float(m.group(1))

        # the first validation batch, as core/data builds it
        n = len(text)
        val = text[n - int(n * VAL_FRACTION):]
        T = CFG["block_size"]
        windows = (len(val) - 1) // T
        x, y = [], []
        for r in range(B):
            off = (r % windows) * T
            x.append(list(val[off:off + T]))
            y.append(list(val[off + 1:off + T + 1]))
        idx, targets = torch.tensor(x), torch.tensor(y)

        weights = torch_ref.st_read(os.path.join(work, ckpt, "model.safetensors"))
        model = torch_ref.GPT(CFG)
        torch_ref.load_weights(model, weights)
        model = model.double().eval()
        with torch.no_grad():
            _, loss = model(idx, targets)
        want = loss.item()
        rel = abs(got - want) / abs(want)
        print(f"torch loss {want:.9g}, weft validate {got:.9g}, relative difference {rel:.3g}")
        if not rel <= 1e-5:
            sys.exit("FAIL: losses differ by more than 1e-5 relative")
        # a trained model, not the initialisation: well below log(256) = 5.55
        if not want < 4.5:
            sys.exit(f"FAIL: loss {want} is not below 4.5: the checkpoint looks untrained")
        print("ok")
    finally:
        if not os.environ.get("WEFT_TEST_KEEP"):
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("kept", work)


main()
