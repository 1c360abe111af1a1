#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The PyTorch peer of `ctrain fit --strategy ddp` for scripts/bench/ddp-throughput.

N ranks of torch DistributedDataParallel over gloo on this machine (torch.multiprocessing.spawn,
rendezvous on a free loopback port). Same model (Linear+ReLU MLP 784-512-256-10, PyTorch's default
init, rank 0's weights broadcast by DDP), optimizer (AdamW lr 1e-3 with a cosine decay to 0 by
step, weight decay 0.01), per-rank batch, data (the Fashion-MNIST IDX files, normalised once at
load, 1/12 of the training set held out) and sharding as ctrain: every rank draws the epoch's
permutation from the seed and takes positions rank, rank+N, ... of it. DDP's default buckets
(25 MB, the first 1 MB) and its overlap of allreduce with backward. Each rank uses --threads torch
threads (default 1: one core per rank). Prints one JSON line (rank 0) with train_samples_per_sec:
all ranks' samples over rank 0's seconds inside the training loop, like ctrain's summary.json.
"""
import argparse
import json
import math
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_mlp import load  # noqa: E402  (same loader and normalisation as the one-process peer)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(args.threads)
    # Debian 13's PyTorch 2.6 is built without libuv, which its TCPStore asks for by default
    os.environ.setdefault("USE_LIBUV", "0")
    dist.init_process_group("gloo", rank=rank, world_size=args.nprocs)
    torch.manual_seed(args.seed)
    x, y = load(args.data, "train")
    n_val = round(len(x) / 12)
    x_train, y_train = x[:-n_val], y[:-n_val]

    dims = [784] + [int(w) for w in args.hidden.split(",")] + [10]
    layers = []
    for i in range(len(dims) - 1):
        layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*layers))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)

    n = len(x_train)
    per_rank = (n + args.nprocs - 1) // args.nprocs
    steps_per_epoch = (per_rank + args.batch_size - 1) // args.batch_size
    total_steps = args.epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda step: 0.5 * (1.0 + math.cos(math.pi * step / total_steps)))
    seconds = 0.0
    samples = 0
    for epoch in range(args.epochs):
        g = torch.Generator()
        g.manual_seed(args.seed * 1000 + epoch)
        perm = torch.randperm(n, generator=g)
        shard = perm[(torch.arange(per_rank) * args.nprocs + rank) % n]
        dist.barrier()
        t0 = time.perf_counter()
        for i in range(0, per_rank, args.batch_size):
            idx = shard[i:i + args.batch_size]
            loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            samples += len(idx) * args.nprocs
        seconds += time.perf_counter() - t0
    if rank == 0:
        x_test, y_test = load(args.data, "t10k")
        with torch.no_grad():
            test_acc = (model(x_test).argmax(1) == y_test).float().mean().item()
        print(json.dumps({
            "peer": "torch %s DDP gloo" % torch.__version__,
            "nprocs": args.nprocs,
            "threads": torch.get_num_threads(),
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "train_samples_per_sec": samples / seconds,
            "test_acc": test_acc,
        }), flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--nprocs", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64, help="per rank")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--hidden", default="512,256")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    args = ap.parse_args()
    mp.spawn(worker, args=(args, free_port()), nprocs=args.nprocs, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
