#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Compare ctrain's MLP with the same model in PyTorch, for t/78-precision-64-true.t.

usage: mlp_torch.py DIR DIMS OPTIMIZER LR TOL

DIR holds what t/tools/mlp_check wrote: batch.safetensors (x F32, y the labels as F32), params.safetensors and
grads.safetensors (ctrain's initial weights and gradients of the mean loss, in the model's type),
losses.txt (ctrain's losses over the optimizer's steps) and check.out ("loss L"). DIMS is the
layer widths "20-16-8-5". This builds nn.Sequential(Linear, ReLU, ..., Linear) in float64 (the
model ctrain's 64-true is: model.double(), x.double()), loads the weights, and prints TAP lines:
the loss and every gradient within TOL relative error (norm of the difference over the norm of
PyTorch's), then the loss of every step of torch.optim.AdamW / SGD (PyTorch's defaults as ctrain
takes them: weight decay 0.01 for AdamW, momentum 0.9 for SGD) within TOL.
"""
import json
import os
import struct
import sys

import numpy as np
import torch

DTYPES = {"F32": "<f4", "F64": "<f8", "U8": "u1"}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dt = np.dtype(DTYPES[e["dtype"]])
        a, b = e["data_offsets"]
        arr = np.frombuffer(data, dtype=dt, count=(b - a) // dt.itemsize, offset=8 + n + a)
        out[name] = torch.from_numpy(arr.reshape(e["shape"]).copy())
    return out


def main():
    d, dims, optimizer, lr, tol = sys.argv[1], [int(v) for v in sys.argv[2].split("-")], sys.argv[3], \
        float(sys.argv[4]), float(sys.argv[5])
    layers = []
    for i in range(len(dims) - 1):
        layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).double()
    params = read_safetensors(os.path.join(d, "params.safetensors"))
    grads = read_safetensors(os.path.join(d, "grads.safetensors"))
    batch = read_safetensors(os.path.join(d, "batch.safetensors"))
    x, y = batch["x"].double(), batch["y"].long()
    # ctrain's names are layers.<i>.weight for the i-th Linear; Sequential's index counts the ReLUs
    linears = [m for m in model if isinstance(m, torch.nn.Linear)]
    named = {}
    for i, lin in enumerate(linears):
        named[f"layers.{i}.weight"] = lin.weight
        named[f"layers.{i}.bias"] = lin.bias
    c_loss = float(open(os.path.join(d, "check.out")).read().split("loss ")[1].split()[0])
    c_losses = [float(line.split()[1]) for line in open(os.path.join(d, "losses.txt"))]
    types = sorted({str(t.dtype) for t in params.values()})

    print(f"1..{2 + len(named) + len(c_losses)}")
    same = sorted(named) == sorted(params)
    print(("ok" if same else "not ok") + f" 1 - ctrain's tensors are PyTorch's ({len(named)} names, stored as {types})")
    with torch.no_grad():
        for n, p in named.items():
            p.copy_(params[n].double())
    loss_fn = torch.nn.CrossEntropyLoss()
    loss = loss_fn(model(x), y)
    loss.backward()
    rel = abs(c_loss - loss.item()) / abs(loss.item())
    print(("ok" if rel <= tol else "not ok") + f" 2 - loss ctrain {c_loss:.12f} torch {loss.item():.12f} "
          f"(rel {rel:.2e}, tolerance {tol:g})")
    t, worst = 3, 0.0
    for n, p in named.items():
        diff = (grads[n].double() - p.grad).norm().item()
        rel = diff / max(p.grad.norm().item(), 1e-30)
        worst = max(worst, rel)
        print(("ok" if rel <= tol else "not ok") + f" {t} - grad {n} rel {rel:.2e}")
        t += 1
    print(f"# worst gradient relative error {worst:.2e}")
    if optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    for s, c in enumerate(c_losses):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        rel = abs(c - loss.item()) / abs(loss.item())
        print(("ok" if rel <= tol else "not ok") + f" {t} - {optimizer} step {s}: loss ctrain {c:.10f} "
              f"torch {loss.item():.10f} (rel {rel:.2e})")
        t += 1


if __name__ == "__main__":
    main()
