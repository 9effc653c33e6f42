#!/usr/bin/env python3
"""Loads what test_train_hf exported into hf_export/ (the test's working
directory) with the libraries users load it with:

  - transformers' GPT2LMHeadModel.from_pretrained("hf_export") (weft ckpt
    export --format hf) must give weft's logits on weft's batch
    (weft_logits.safetensors);
  - nanoGPT's strict load_state_dict (tests/fixtures/models/torch_ref.py)
    must take nanogpt.safetensors (the default export, lm_head.weight
    included) and give the same logits.

Tolerance: |torch - weft| <= 1e-4 |weft| + 1e-5 per element. Both run the
same float32 weights; transformers and weft differ only in float32
rounding (about 1e-6 here), while a transposed or misnamed tensor, or
GELU's exact form, moves the logits by 1e-3 or more.

Exit 77 (ctest's skip) when torch or transformers is not importable by
this interpreter (set WEFT_HF_PYTHON at configure time).
"""
import os
import sys

sys.dont_write_bytecode = True
try:
    import torch
    from safetensors.torch import load_file
    from transformers import GPT2LMHeadModel
except ImportError as e:
    print(f"skipped: {e} (interpreter {sys.executable}; set WEFT_HF_PYTHON)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.environ.get("WEFT_SOURCE_DIR", "."), "tests", "fixtures",
                                "models"))
import torch_ref  # noqa: E402


def check(what, got, want):
    err = ((got - want).abs() / (1e-4 * want.abs() + 1e-5)).max().item()
    worst = (got - want).abs().max().item()
    print(f"{what}: max |difference| {worst:.3g}, worst ratio to the tolerance {err:.3g}")
    if not err <= 1.0:
        sys.exit(f"FAIL: {what}: logits differ from weft's beyond 1e-4 relative + 1e-5")


ref = load_file("hf_export/weft_logits.safetensors")
ids, want = ref["ids"], ref["logits"]

model = GPT2LMHeadModel.from_pretrained("hf_export").eval()
with torch.no_grad():
    check("transformers from_pretrained", model(ids).logits, want)

cfg = model.config
ng = torch_ref.GPT(dict(n_layer=cfg.n_layer, n_head=cfg.n_head, n_embd=cfg.n_embd,
                        vocab_size=cfg.vocab_size, block_size=cfg.n_positions, bias=True,
                        dropout=0.0))
state = load_file("hf_export/nanogpt.safetensors")
ng.load_state_dict(state, strict=True)
with torch.no_grad():
    logits = ng(ids, ids)[0]
check("nanoGPT strict load_state_dict", logits, want)
print("ok")
