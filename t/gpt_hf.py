#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Hugging Face transformers' side of t/76-gpt-hf.t (transformers for tests only).

  gpt_hf.py make DIR N_LAYER N_HEAD N_EMBD N_POSITIONS VOCAB SEED
      a GPT2LMHeadModel of that configuration with random weights (LayerNorm weights and every bias
      random too, so a misplaced tensor shows), saved by save_pretrained: DIR/model.safetensors
      (transformer.* names) and DIR/config.json; DIR/base/ the same as a GPT2Model (no prefix)
  gpt_hf.py logits DIR TOKENS OUT
      the logits after every prefix of TOKENS (one forward), one line per position, into OUT;
      fails when from_pretrained reports missing or unexpected tensors
  gpt_hf.py compare A B TOL
      max |a - b| over two logits files; exit 1 above TOL
  gpt_hf.py greedy DIR TOKENS N
      N tokens of greedy generation after TOKENS, comma-separated
  gpt_hf.py shard PATH N VOCAB SEED
      an llm.c token shard (uint16) of N random tokens below VOCAB
  gpt_hf.py tamper SRC DST KIND
      SRC/model.safetensors changed into DST/model.safetensors (no config.json): untied (an
      lm_head.weight that is not wte), unknown (a tensor GPT-2 does not have), f16 (float16 tensors)
"""
import sys

import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel


def make(d, n_layer, n_head, n_embd, n_pos, vocab, seed):
    torch.manual_seed(int(seed))
    cfg = GPT2Config(n_layer=int(n_layer), n_head=int(n_head), n_embd=int(n_embd), n_positions=int(n_pos),
                     vocab_size=int(vocab), resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    m = GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "ln_" in name and name.endswith("weight"):
                p.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                p.normal_(0.0, 0.05)
    m.save_pretrained(d, safe_serialization=True)
    m.transformer.save_pretrained(d + "/base", safe_serialization=True)


def load(d):
    m, info = GPT2LMHeadModel.from_pretrained(d, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if bad:
        sys.exit("from_pretrained(%s): %s" % (d, bad))
    return m.eval()


def logits(d, tokens, out):
    m = load(d)
    ids = torch.tensor([[int(t) for t in tokens.split(",")]])
    with torch.no_grad():
        z = m(ids).logits[0].double().numpy()
    np.savetxt(out, z, fmt="%.9g")


def compare(a, b, tol):
    x, y = np.loadtxt(a, ndmin=2), np.loadtxt(b, ndmin=2)
    if x.shape != y.shape:
        sys.exit("shapes differ: %s %s" % (x.shape, y.shape))
    diff = float(np.max(np.abs(x - y)))
    print("max |difference| %.3g over %d logits (tolerance %s)" % (diff, x.size, tol))
    sys.exit(0 if diff <= float(tol) else 1)


def greedy(d, tokens, n):
    m = load(d)
    ids = torch.tensor([[int(t) for t in tokens.split(",")]])
    with torch.no_grad():
        out = m.generate(ids, max_new_tokens=int(n), do_sample=False, pad_token_id=0)
    print(",".join(str(int(t)) for t in out[0][ids.shape[1]:]))


def shard(path, n, vocab, seed):
    rng = np.random.default_rng(int(seed))
    header = np.zeros(256, dtype="<i4")
    header[:3] = (20240520, 1, int(n))
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(rng.integers(0, int(vocab), int(n)).astype("<u2").tobytes())


def tamper(src, dst, kind):
    import os
    from safetensors.numpy import load_file, save_file
    t = load_file(src + "/model.safetensors")
    if kind == "untied":
        t["lm_head.weight"] = t["transformer.wte.weight"] + np.float32(0.01)
    elif kind == "unknown":
        t["transformer.h.0.attn.extra.weight"] = np.zeros((2, 2), dtype=np.float32)
    elif kind == "f16":
        t = {k: v.astype(np.float16) for k, v in t.items()}
    os.makedirs(dst, exist_ok=True)
    save_file(t, dst + "/model.safetensors", metadata={"format": "pt"})


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"make": make, "logits": logits, "compare": compare, "greedy": greedy, "shard": shard, "tamper": tamper}[cmd](*args)
