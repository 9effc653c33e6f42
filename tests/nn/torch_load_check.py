#!/usr/bin/python3
"""Loads the model.safetensors weft wrote (test_nn_export) into PyTorch's
nanoGPT-style reference (tests/fixtures/models/torch_ref.py) and checks
that PyTorch computes weft's loss on weft's batch.

Tolerance: 1e-5 relative. PyTorch runs in float64; weft's float32 loss on
this model is within ~1e-7 relative (see test_nn_golden), so 1e-5 fails
only when weights are misnamed, mis-shaped or mis-ordered.

Exit 77 (ctest's skip) when python3-torch is not importable.
"""
import os
import sys

sys.dont_write_bytecode = True
try:
    import torch
except ImportError:
    print("skipped: python3-torch is not importable by", sys.executable)
    sys.exit(77)

sys.path.insert(0, os.path.join(os.environ.get("WEFT_SOURCE_DIR", "."), "tests", "fixtures",
                                "models"))
import torch_ref  # noqa: E402

CFG = dict(n_layer=2, n_head=4, n_embd=32, vocab_size=64, block_size=16, bias=True, dropout=0.0)

weights = torch_ref.st_read("nn_export_model.safetensors")
batch = torch_ref.st_read("nn_export_batch.safetensors")
model = torch_ref.GPT(CFG)
names = [n for n, _ in model.named_parameters()]
if list(weights) != names:
    sys.exit(f"FAIL: weft's names/order differ from nanoGPT's:\n{list(weights)}\n{names}")
for n, p in model.named_parameters():
    if tuple(weights[n].shape) != tuple(p.shape):
        sys.exit(f"FAIL: {n}: weft {tuple(weights[n].shape)}, torch {tuple(p.shape)}")
torch_ref.load_weights(model, weights)
model = model.double()
with torch.no_grad():
    _, loss = model(batch["idx"], batch["targets"])
want, got = loss.item(), batch["loss"].item()
rel = abs(got - want) / abs(want)
print(f"torch loss {want:.9g}, weft loss {got:.9g}, relative difference {rel:.3g}")
if not rel <= 1e-5:
    sys.exit("FAIL: losses differ by more than 1e-5 relative")
print("ok")
