#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Compare ctrain's GPT with the same model in PyTorch (llm.c's test_gpt2 idea), for t/70-gpt-torch.t.

usage: gpt_torch.py [--tol X] DIR N_LAYER N_HEAD N_EMBD SEQ_LEN VOCAB LR [BF16_DIR]

DIR holds what t/tools/gpt_check wrote: tokens.bin (the batch), params.safetensors (ctrain's
initial weights), grads.safetensors (ctrain's gradients of the mean loss), losses.txt (ctrain's
losses over AdamW steps) and check.out (its stdout: "loss L"). This loads the weights into
scripts/bench/torch_gpt.py's GPT (in float64: the reference is the exact math, so the errors
measured are ctrain's), runs the batch, and prints TAP lines: the loss and every gradient within
1e-4 relative error (norm of the difference over the norm of PyTorch's gradient), then the loss of
every AdamW step (torch.optim.AdamW, the same hyper-parameters) within 1e-3 relative error. It
also checks that backward announced each tensor once, last first (check.out), and, given BF16_DIR
(gpt_check --bf16 on the same seed), that bf16-mixed's first loss is within 1e-2 of the exact one
while differing from fp32's (it really rounds).

--tol X sets both tolerances to X: 64-true's files (gpt_check --f64, F64 tensors) are compared
within 1e-10, the float64 reference being then the same arithmetic up to rounding order.

--bf16-true: bf16-true's files (gpt_check --bf16-true, BF16 tensors) against the same model in
bfloat16 (model.to(torch.bfloat16), Lightning's bf16-true; AdamW's state then bf16 too): the loss and
the 20 AdamW losses within 2e-2 relative error, every gradient within 5e-2 (two bf16 computations
round at different points: a gradient's relative error is of the order of bf16's 2^-8 times the
depth it went through). PyTorch's loss is itself a bf16 value (a step of 2^-5 near 5).
The reference's products must accumulate in fp32, as bf16-true promises (and as PyTorch's oneDNN
kernels do on a CPU with AVX-512): PyTorch 1.13's own bf16 matmul, which it takes on a CPU without
AVX-512 (an AVX2 Zen 3, qemu -cpu Haswell), accumulates in bf16 (5e-2 relative error on a product
of 2048 terms). Where a probe product shows that, the reference runs its matmuls and Linear layers
on the bf16 values widened to fp32 and rounds each result once to bf16, and says so.
"""
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "bench"))
from torch_gpt import GPT  # noqa: E402

GRAD_TOL = 1e-4
LOSS_TOL = 1e-3


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] in ("F32", "F64", "BF16"), (name, e["dtype"])
        a, b = e["data_offsets"]
        if e["dtype"] == "BF16":  # the upper halves of fp32 values
            u = np.frombuffer(data, dtype="<u2", count=(b - a) // 2, offset=8 + n + a).astype(np.uint32) << 16
            out[name] = torch.from_numpy(u.view(np.float32).reshape(e["shape"]).copy()).to(torch.bfloat16)
            continue
        dt = "<f4" if e["dtype"] == "F32" else "<f8"
        arr = np.frombuffer(data, dtype=dt, count=(b - a) // np.dtype(dt).itemsize, offset=8 + n + a)
        out[name] = torch.from_numpy(arr.reshape(e["shape"]).copy())
    return out


def bf16_matmul_error(k=2048):
    """Relative error of PyTorch's bf16 matmul on a product of k terms against the exact product of
    the same bf16 values: about 1e-3 (the result's rounding) where it accumulates in fp32."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, k, generator=g).to(torch.bfloat16)
    b = torch.randn(k, 64, generator=g).to(torch.bfloat16)
    ref = a.double() @ b.double()
    return ((a @ b).double() - ref).norm().item() / ref.norm().item()


def accumulate_bf16_products_in_fp32():
    """torch_gpt's products (nn.Linear's F.linear, the @ of attention and of the LM head) on bf16
    tensors computed in fp32 and rounded once to bf16; their gradients the same way (autograd through
    the casts)."""
    linear, matmul = torch.nn.functional.linear, torch.Tensor.__matmul__

    def wide(t):
        return t.float() if isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16 else t

    def linear_fp32(x, w, b=None):
        if x.dtype != torch.bfloat16:
            return linear(x, w, b)
        return linear(wide(x), wide(w), wide(b)).to(torch.bfloat16)

    def matmul_fp32(a, b):
        if a.dtype != torch.bfloat16:
            return matmul(a, b)
        return matmul(wide(a), wide(b)).to(torch.bfloat16)

    torch.nn.functional.linear = linear_fp32
    torch.Tensor.__matmul__ = matmul_fp32


def read_tokens(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype="<i4")
        assert header[0] == 20240520 and header[1] == 1, header[:3]
        tokens = np.frombuffer(f.read(), dtype="<u2")
    assert len(tokens) == header[2]
    return torch.from_numpy(tokens.astype(np.int64))


def main():
    global GRAD_TOL, LOSS_TOL
    dtype = torch.float64
    if sys.argv[1] == "--bf16-true":
        dtype = torch.bfloat16
        GRAD_TOL, LOSS_TOL = 5e-2, 2e-2
        del sys.argv[1]
        err = bf16_matmul_error()
        if err > 1e-2:
            print(f"# PyTorch's bf16 matmul accumulates in bf16 on this CPU (rel err {err:.1e} over 2048 terms):"
                  " the reference's products run in fp32 on the bf16 values, rounded once")
            accumulate_bf16_products_in_fp32()
    if sys.argv[1] == "--tol":
        GRAD_TOL = LOSS_TOL = float(sys.argv[2])
        del sys.argv[1:3]
    d = sys.argv[1]
    n_layer, n_head, n_embd, seq_len, vocab = (int(v) for v in sys.argv[2:7])
    lr = float(sys.argv[7])
    torch.manual_seed(0)
    model = GPT(n_layer, n_head, n_embd, seq_len, vocab).to(dtype)
    params = read_safetensors(os.path.join(d, "params.safetensors"))
    grads = read_safetensors(os.path.join(d, "grads.safetensors"))
    names = [n for n, _ in model.named_parameters()]
    missing = sorted(set(names) ^ set(params))
    tokens = read_tokens(os.path.join(d, "tokens.bin"))
    B = (len(tokens) - 1) // seq_len
    x = tokens[:B * seq_len].view(B, seq_len)
    y = tokens[1:B * seq_len + 1].view(B, seq_len)
    check_out = open(os.path.join(d, "check.out")).read()
    c_loss = float(check_out.split("loss ")[1].split()[0])
    bf16_dir = sys.argv[8] if len(sys.argv) > 8 else None
    c_losses = [float(line.split()[1]) for line in open(os.path.join(d, "losses.txt"))]

    n_tests = 3 + len(names) + len(c_losses) + (1 if bf16_dir else 0)
    print(f"1..{n_tests}")
    print(("ok" if not missing else "not ok") + f" 1 - ctrain's tensors are PyTorch's ({len(names)} names)"
          + ("" if not missing else f" # differ: {missing}"))
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(params[n].to(dtype))
    loss = model(x, y)
    loss.backward()
    rel = abs(c_loss - loss.item()) / abs(loss.item())
    first_tol = LOSS_TOL if dtype == torch.bfloat16 else GRAD_TOL
    print(("ok" if rel <= first_tol else "not ok") + f" 2 - loss ctrain {c_loss:.7f} torch {loss.item():.7f} "
          f"(rel {rel:.2e}, tolerance {first_tol:g})")
    announced = f"announced {len(names)} tensors\n" in check_out
    print(("ok" if announced else "not ok") + f" 3 - backward announced all {len(names)} tensors in order, last first")
    t = 4
    if bf16_dir:
        b_loss = float(open(os.path.join(bf16_dir, "check.out")).read().split("loss ")[1].split()[0])
        rel = abs(b_loss - loss.item()) / abs(loss.item())
        good = rel <= 1e-2 and b_loss != c_loss
        print(("ok" if good else "not ok") + f" {t} - bf16-mixed loss {b_loss:.7f} within 1e-2 of torch's "
              f"{loss.item():.7f} (rel {rel:.2e}) and not fp32's")
        t += 1
    worst = 0.0
    for n, p in model.named_parameters():
        ref = p.grad
        diff = (grads[n].double() - ref.double()).norm().item()
        rel = diff / max(ref.double().norm().item(), 1e-30)
        worst = max(worst, rel)
        print(("ok" if rel <= GRAD_TOL else "not ok") + f" {t} - grad {n} rel {rel:.2e}")
        t += 1
    print(f"# worst gradient relative error {worst:.2e}")

    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    for s, c in enumerate(c_losses):
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        opt.step()
        rel = abs(c - loss.item()) / abs(loss.item())
        print(("ok" if rel <= LOSS_TOL else "not ok") + f" {t} - AdamW step {s}: loss ctrain {c:.6f} "
              f"torch {loss.item():.6f} (rel {rel:.2e})")
        t += 1


if __name__ == "__main__":
    main()
