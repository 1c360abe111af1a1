#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The PyTorch peer of ctrain's GPT (engine/models/gpt) for scripts/bench/gpt-throughput.

The same GPT-2 architecture, written plainly in eager PyTorch: token + learned position
embeddings, pre-LayerNorm blocks (causal self-attention, GELU(tanh) MLP), final LayerNorm, LM head
tied to the token embedding. Parameter names are ctrain's (wte.weight, h.0.attn.c_attn.weight, ...),
so t/gpt_torch.py loads ctrain's safetensors into it. Run as a script it times training steps
(forward, cross-entropy, backward, AdamW) on random byte tokens and prints one JSON line with
tokens_per_sec (wall clock; tokens_per_cpu_sec: per the process's CPU time, all its threads, rank 0's
when distributed). --precision: 32-true (fp32), bf16-mixed (fp32 parameters, the forward under CPU
autocast to bfloat16) or bf16-true (the model in torch.bfloat16, model.to(torch.bfloat16), as
Lightning's bf16-true: parameters, activations, gradients and AdamW's state in bf16) or 64-true (the
model in torch.float64, model.double()). With --nprocs N it runs N ranks of DistributedDataParallel over gloo on this
machine (torch.multiprocessing.spawn, one torch thread per rank unless --threads, DDP's default
buckets and overlap), each rank taking every N-th window; tokens/s is all ranks' tokens over rank
0's seconds in the timed steps. --device cuda runs one process on the first GPU (scripts/gpu-check: the
PyTorch GPT of ctrain's shape on the same GPU; bf16-mixed is CUDA autocast there).
"""
import argparse
import json
import math
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, n_embd, n_head, seq_len, attention="math"):
        super().__init__()
        self.n_head = n_head
        # "math": the masked softmax written out (any PyTorch); "sdpa": F.scaled_dot_product_attention,
        # the fused kernel current PyTorch (>= 2.0) users take
        self.sdpa = attention == "sdpa"
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        # uint8, not bool: DDP broadcasts buffers and gloo has no bool
        mask = torch.tril(torch.ones(seq_len, seq_len, dtype=torch.uint8))
        self.register_buffer("mask", mask.view(1, 1, seq_len, seq_len), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, seq_len, attention="math"):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = Attention(n_embd, n_head, seq_len, attention)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, n_layer=4, n_head=4, n_embd=256, seq_len=128, vocab=256, attention="math"):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(seq_len, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head, seq_len, attention) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        # GPT-2's initialisation (ctrain's ct_gpt_init draws the same distributions)
        for name, p in self.named_parameters():
            if name.endswith(".bias"):
                nn.init.zeros_(p)
            elif "ln_" in name:
                nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def run(rank, args, port):
    """One process (nprocs 1) or one DDP rank: 3 warm-up steps, then args.steps timed ones."""
    if args.nprocs > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        # Debian 13's PyTorch 2.6 is built without libuv, which its TCPStore asks for by default
        os.environ.setdefault("USE_LIBUV", "0")
        dist.init_process_group("gloo", rank=rank, world_size=args.nprocs)
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    model = GPT(args.n_layer, args.n_head, args.n_embd, args.seq_len, args.vocab, args.attention)
    if args.precision in ("bf16-true", "64-true"):
        model = model.to(torch.bfloat16 if args.precision == "bf16-true" else torch.float64)
    dev = torch.device(args.device)
    model = model.to(dev)
    if args.nprocs > 1:
        try:
            model = nn.parallel.DistributedDataParallel(model)
        except RuntimeError as e:
            # PyTorch 1.13's gloo has no bfloat16: DDP's first broadcast of the parameters fails
            raise SystemExit(f"torch_gpt.py: DistributedDataParallel over gloo in {args.precision} failed ({e}) "
                             f"on PyTorch {torch.__version__}: run --nprocs with 32-true, bf16-mixed or 64-true")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    T, B, N = args.seq_len, args.batch_size, args.nprocs
    # A fixed stream of random tokens cut into windows in order; rank r takes windows r, r+N, ...
    stream = torch.randint(0, args.vocab, (B * N * T * (args.steps + 3) + 1,)).to(dev)
    windows = torch.arange(B * N * (args.steps + 3)).view(-1, N)[:, rank].contiguous().to(dev)
    positions = torch.arange(T, device=dev).view(1, T)

    def step(i):
        w = windows[i * B:(i + 1) * B] * T
        idx = w.view(B, 1) + positions
        x, y = stream[idx], stream[idx + 1]
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=args.precision == "bf16-mixed"):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    for i in range(3):
        step(i)
    if N > 1:
        dist.barrier()
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(3, 3 + args.steps):
        loss = step(i)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    if rank == 0:
        probe = {"matmul_tflops": matmul_tflops()} if args.matmul_probe and dev.type == "cuda" else {}
        print(json.dumps({**probe, "tokens_per_sec": B * N * T * args.steps / dt, "tokens_per_cpu_sec": B * T * args.steps / cpu,
                          "steps": args.steps, "nprocs": N,
                          "threads": torch.get_num_threads(), "precision": args.precision,
                          "attention": args.attention, "torch": torch.__version__, "loss": loss,
                          "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"}),
              flush=True)
    if N > 1:
        dist.destroy_process_group()


def matmul_tflops(n=8192, reps=20):
    """The device's measured dense bf16 rate: torch.matmul of two n x n bf16 matrices, after warm-up."""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    torch.cuda.synchronize()
    return 2 * n ** 3 * reps / (time.perf_counter() - t0) / 1e12


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=16, help="sequences per step (per rank)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps (after 3 warm-up steps)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    ap.add_argument("--precision", choices=["32-true", "bf16-mixed", "bf16-true", "64-true"], default="32-true")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--nprocs", type=int, default=1, help="DDP ranks (gloo); 1: one plain process")
    ap.add_argument("--attention", choices=["math", "sdpa"], default="math",
                    help="masked softmax written out, or F.scaled_dot_product_attention (PyTorch >= 2.0)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="cuda: one process on the first GPU")
    ap.add_argument("--matmul-probe", action="store_true",
                    help="cuda: also time an 8192^3 bf16 matmul (matmul_tflops: the device's own dense rate)")
    args = ap.parse_args()
    if args.device == "cuda" and args.nprocs > 1:
        ap.error("--device cuda runs one process (DDP here is gloo on the CPU)")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error(f"--device cuda: this PyTorch ({torch.__version__}) sees no CUDA device")
    if args.attention == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
        ap.error(f"--attention sdpa needs PyTorch >= 2.0 (this is {torch.__version__})")
    if args.nprocs > 1:
        if not args.threads:
            args.threads = 1
        mp.spawn(run, args=(args, free_port()), nprocs=args.nprocs, join=True)
    else:
        run(0, args, 0)


if __name__ == "__main__":
    main()
