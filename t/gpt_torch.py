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
the 20 AdamW losses within 2e-2 relative error. PyTorch's loss is itself a bf16 value (a step of 2^-5
near 5). Every gradient within 2e-2 of the exact gradient: the same bf16 weights and batch in float64
(a bf16 gradient's relative error is of the order of bf16's 2^-8 times the depth it went through).
Not against PyTorch's bf16 gradient: on a CPU without AVX512-BF16 its own bf16 products are ~5e-2
from the exact gradient where ctrain's are ~7e-3 (measured on a Zen 3), so a comparison with it
tested PyTorch's CPU; both errors are printed.
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
EXACT_TOL = 2e-2  # bf16-true's gradients against the exact ones: 2^-8 per rounding, a few roundings deep


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


def read_tokens(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype="<i4")
        assert header[0] == 20240520 and header[1] == 1, header[:3]
        tokens = np.frombuffer(f.read(), dtype="<u2")
    assert len(tokens) == header[2]
    return torch.from_numpy(tokens.astype(np.int64))


def rel_err(got, ref):
    """The norm of the difference over the reference's norm, in float64."""
    return (got.double() - ref.double()).norm().item() / max(ref.double().norm().item(), 1e-30)


def exact_grads(params, x, y, n_layer, n_head, n_embd, seq_len, vocab):
    """bf16-true's reference: the same weights (bf16 values, exact in float64) and batch in float64."""
    model = GPT(n_layer, n_head, n_embd, seq_len, vocab).to(torch.float64)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(params[n].double())
    model(x, y).backward()
    return {n: p.grad for n, p in model.named_parameters()}


def main():
    global GRAD_TOL, LOSS_TOL
    dtype = torch.float64
    if sys.argv[1] == "--bf16-true":
        dtype = torch.bfloat16
        GRAD_TOL, LOSS_TOL = 5e-2, 2e-2
        del sys.argv[1]
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
    exact = exact_grads(params, x, y, n_layer, n_head, n_embd, seq_len, vocab) if dtype == torch.bfloat16 else None
    worst = 0.0
    for n, p in model.named_parameters():
        ref = p.grad
        rel = rel_err(grads[n], ref)
        worst = max(worst, rel)
        if exact is None:
            print(("ok" if rel <= GRAD_TOL else "not ok") + f" {t} - grad {n} rel {rel:.2e}")
        else:
            # against the exact gradient (float64 from the same bf16 weights): PyTorch's bf16 gradient is
            # no reference for ctrain's, its own bf16 GEMMs on a CPU without AVX512-BF16 being further
            # from the exact one (~5e-2) than ctrain's fp32-accumulated products (~7e-3)
            rc, rt = rel_err(grads[n], exact[n]), rel_err(ref, exact[n])
            print(("ok" if rc <= EXACT_TOL else "not ok") + f" {t} - grad {n} rel {rc:.2e} to the exact gradient "
                  f"(torch bf16's {rt:.2e}; ctrain to torch bf16 {rel:.2e})")
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
