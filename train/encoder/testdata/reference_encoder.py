#!/usr/bin/python3
"""Reference implementation of nerflow's encoder in PyTorch, for benchmarks.

The Go benchmark (train/encoder/refbench_test.go) writes the batches it
trains on, already masked and laid out, to a JSON file; this script builds
the same architecture -- word vectors and a character CNN (kernel 3, max
pooling over each distinct spelling) projected to the model's width, learned
positions, pre- or post-norm transformer layers, a masked-LM head tied to
the word vectors -- trains it on the same batches (mean negative
log-likelihood of the masked words, gradient clipping, Adam) and scores them
without dropout or gradients. Attention uses PyTorch's fused
scaled_dot_product_attention where it exists (2.0 and later), as a PyTorch
user would write it today, and the explicit softmax(QK^T/sqrt(d))V
otherwise. The protocol is package internal/refbench's: {"ready": true} once
warmed, then one line of JSON per "round" read on standard input.
"""

import math
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "internal", "refbench"))
import reference  # noqa: E402  (package refbench's protocol)

FUSED = hasattr(F, "scaled_dot_product_attention")


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["dim"]
        self.heads = c["heads"]
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d, eps=c["layer_norm_eps"])
        self.ffn1 = nn.Linear(d, c["ffn"])
        self.ffn2 = nn.Linear(c["ffn"], d)
        self.ln2 = nn.LayerNorm(d, eps=c["layer_norm_eps"])
        self.drop = nn.Dropout(c["dropout"])
        self.attn_drop = c["attn_dropout"]
        self.pre_ln = c["pre_ln"]

    def attention(self, x, key_bias):
        n, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(x).view(n, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        p = self.attn_drop if self.training else 0.0
        if FUSED:
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=key_bias, dropout_p=p)
        else:
            scores = q @ k.transpose(2, 3) / math.sqrt(d // h) + key_bias
            ctx = F.dropout(scores.softmax(3), p, self.training) @ v
        return self.out(ctx.transpose(1, 2).reshape(n, t, d))

    def feed_forward(self, x):
        return self.ffn2(F.gelu(self.ffn1(x)))

    def forward(self, x, key_bias):
        if self.pre_ln:
            x = x + self.drop(self.attention(self.ln1(x), key_bias))
            return x + self.drop(self.feed_forward(self.ln2(x)))
        x = self.ln1(x + self.drop(self.attention(x, key_bias)))
        return self.ln2(x + self.drop(self.feed_forward(x)))


class Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        eps = c["layer_norm_eps"]
        self.word = nn.Embedding(c["words"], c["word_dim"])
        self.char = nn.Embedding(c["chars"], c["char_dim"], padding_idx=0)
        self.conv = nn.Conv1d(c["char_dim"], c["char_filters"], 3, padding=1)
        self.inp = nn.Linear(c["word_dim"] + c["char_filters"], c["dim"])
        self.pos = nn.Parameter(torch.randn(c["max_len"], c["dim"]) * 0.02)
        self.emb_ln = nn.LayerNorm(c["dim"], eps=eps)
        self.layers = nn.ModuleList(Layer(c) for _ in range(c["layers"]))
        self.final_ln = nn.LayerNorm(c["dim"], eps=eps) if c["pre_ln"] else None
        self.head = nn.Linear(c["dim"], c["word_dim"])
        self.head_ln = nn.LayerNorm(c["word_dim"], eps=eps)
        self.out_bias = nn.Parameter(torch.zeros(c["words"]))
        self.drop = nn.Dropout(c["dropout"])

    def encode(self, b):
        n, t = b["n"], b["t"]
        ce = self.char(b["char_ids"]).transpose(1, 2)  # [rows, Ec, L]
        feat = (self.conv(ce) + b["char_mask"]).amax(2)[b["of"]]  # [tokens, F]
        feat = torch.cat([feat.new_zeros(1, feat.shape[1]), feat])[b["char_row"]]
        x = self.inp(torch.cat([self.word(b["ids"]), feat], 1)).view(n, t, -1)
        x = self.drop(self.emb_ln(x + self.pos[:t]))
        for layer in self.layers:
            x = layer(x, b["key_bias"])
        return self.final_ln(x) if self.final_ln is not None else x

    def nll(self, b):
        h = self.encode(b).reshape(b["n"] * b["t"], -1)[b["predict"]]
        y = self.drop(self.head_ln(F.gelu(self.head(h))))
        logp = F.log_softmax(F.linear(y, self.word.weight, self.out_bias), 1)
        return -logp.gather(1, b["targets"].unsqueeze(1)).sum()


def tensors(b, device):
    n, t = b["n"], b["t"]
    bias = torch.zeros(n, t)
    for i, k in enumerate(b["lens"]):
        bias[i, k:] = -1e9
    long = lambda xs: torch.tensor(xs, dtype=torch.long, device=device)
    return {
        "n": n, "t": t, "tokens": b["tokens"],
        "ids": long(b["ids"]),
        "char_ids": long(b["char_ids"]).view(b["char_rows"], b["char_len"]),
        "char_mask": torch.tensor(b["char_mask"], device=device).view(b["char_rows"], 1, b["char_len"]),
        "of": long(b["of"]),
        "char_row": long(b["char_row"]),
        # Nothing is masked in a fine-tuning batch (Go writes null).
        "predict": long(b["predict"] or []),
        "targets": long(b["targets"] or []),
        "key_bias": bias.view(n, 1, 1, t).to(device),
    }


def main():
    args = reference.parser().parse_args()
    device, spec = reference.setup(args)
    c = spec["config"]
    model = Encoder(c).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=c["lr"])
    batches = [tensors(b, device) for b in spec["batches"]]

    def train(bs):
        model.train()
        for b in bs:
            opt.zero_grad()
            loss = model.nll(b) / len(b["targets"])
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), c["clip"])
            opt.step()

    def score(bs):
        model.eval()
        with torch.no_grad():
            for b in bs:
                model.nll(b).item()

    reference.serve("reference_encoder", device, batches, args.warmup, train, score,
                    ready={"fused_attention": FUSED, "params": sum(p.numel() for p in model.parameters())},
                    torch_note=" (fused attention)" if FUSED else "")


if __name__ == "__main__":
    main()
