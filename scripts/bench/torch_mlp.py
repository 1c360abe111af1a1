#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The PyTorch peer of `ctrain fit` for scripts/bench/train-throughput.

Same model (Linear+ReLU MLP, 784-512-256-10, PyTorch's default init), same optimizer (AdamW,
lr 1e-3 with a cosine decay to 0 by step, weight decay 0.01, or SGD momentum 0.9), same batch (128), same data (the Fashion-MNIST
IDX files, normalised once at load with mean 0.2860 / std 0.3530, 1/12 of the training set held
out), same loop shape (reshuffle every epoch, gather a batch by index, forward, cross-entropy,
backward, step). Eager mode, one process. Prints one JSON line with train_samples_per_sec, timed
over the training steps only, like ctrain's summary.json.
"""
import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data_dir, prefix):
    x = read_idx(os.path.join(data_dir, prefix + "-images-idx3-ubyte.gz")).reshape(-1, 784)
    y = read_idx(os.path.join(data_dir, prefix + "-labels-idx1-ubyte.gz"))
    x = (torch.from_numpy(x.astype(np.float32)) / 255.0 - 0.2860) / 0.3530
    return x.contiguous(), torch.from_numpy(y.astype(np.int64))


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    ap.add_argument("--lr-schedule", choices=["cosine", "constant"], default="cosine")
    ap.add_argument("--hidden", default="512,256")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (scripts/bench/gpu-throughput)")
    ap.add_argument("--precision", choices=["32-true", "bf16-mixed", "bf16-true", "16-mixed"], default="32-true",
                    help="mixed: torch.autocast to bf16/fp16 (16-mixed with a GradScaler), fp32 weights; "
                         "bf16-true: the model and inputs in torch.bfloat16 (model.to(torch.bfloat16), as "
                         "Lightning's bf16-true)")
    args = ap.parse_args()
    dev = torch.device(args.device)

    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    x, y = load(args.data, "train")
    n_val = round(len(x) / 12)
    x_train, y_train = x[:-n_val], y[:-n_val]
    x_test, y_test = load(args.data, "t10k")
    # On a GPU the data sits in device memory (PyTorch's fastest eager setup), batches gathered there.
    x_train, y_train, x_test, y_test = (t.to(dev) for t in (x_train, y_train, x_test, y_test))

    dims = [784] + [int(w) for w in args.hidden.split(",")] + [10]
    layers = []
    for i in range(len(dims) - 1):
        layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).to(dev)
    if args.precision == "bf16-true":
        model = model.to(torch.bfloat16)
        x_train, x_test = x_train.to(torch.bfloat16), x_test.to(torch.bfloat16)
    amp_dtype = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(args.precision)
    scaler = torch.cuda.amp.GradScaler() if args.precision == "16-mixed" else None
    if args.optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    n = len(x_train)
    total_steps = args.epochs * ((n + args.batch_size - 1) // args.batch_size)
    if args.lr_schedule == "cosine":  # ctrain's default: from lr to 0 by global step
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda step: 0.5 * (1.0 + math.cos(math.pi * step / total_steps)))
    else:
        sched = None
    seconds = 0.0
    samples = 0
    for epoch in range(args.epochs):
        perm = torch.randperm(n, device=dev)
        sync(dev)
        t0 = time.perf_counter()
        for i in range(0, n, args.batch_size):
            idx = perm[i:i + args.batch_size]
            xb, yb = x_train[idx], y_train[idx]
            with torch.autocast(dev.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            if scaler:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            if sched:
                sched.step()
            samples += len(idx)
        sync(dev)
        seconds += time.perf_counter() - t0
    with torch.no_grad(), torch.autocast(dev.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        test_acc = (model(x_test).argmax(1) == y_test).float().mean().item()
    print(json.dumps({
        "peer": "torch %s eager" % torch.__version__,
        "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "precision": args.precision,
        "epochs": args.epochs,
        "train_samples_per_sec": samples / seconds,
        "test_acc": test_acc,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
