#!/usr/bin/python3
"""Reference implementation of fine-tuning nerflow's encoder under its
tagger, in PyTorch, for benchmarks.

The Go benchmark (BenchmarkFineTuneThroughput in ../refbench_test.go)
writes the tagger's batches as the tagger's own benchmark does, and beside
each the encoder's input for the same sentences: their windows of at most
max_len tokens laid out as the encoder reads them, and each window's
sentence and offset. This script puts the two references together: the
encoder of reference_encoder.py computes the states of the windows, which
are gathered into the tagger's packed order and join the word
representation of reference_tagger.py's model under its BiLSTM (placement
"under"). Training is Adam with the encoder's weights at a rate of their
own, and clipping over all weights; prediction is the tagger's, without
dropout or gradients. The protocol is package internal/refbench's.
"""

import os
import sys

import torch
from torch import nn

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "internal", "refbench"))
sys.path.insert(0, os.path.join(here, "..", "..", "tagger", "testdata"))
sys.path.insert(0, here)
import reference  # noqa: E402  (package refbench's protocol)
import reference_encoder  # noqa: E402
import reference_tagger  # noqa: E402


class FineTune(nn.Module):
    def __init__(self, tagger_config, encoder_config):
        super().__init__()
        self.encoder = reference_encoder.Encoder(encoder_config)
        self.tagger = reference_tagger.Tagger(tagger_config)

    def hidden(self, b):
        x = self.encoder.encode(b["enc"])
        states = x.reshape(-1, x.shape[2])[b["enc_index"]]
        return self.tagger.encode(b, states)


def encoder_index(sentences, windows, t, max_len):
    """The position in the encoder's output [windows * t] of every token of
    the batch, in the tagger's packed order (sentences by decreasing length,
    stably, then step by step)."""
    row = {(s, off): r for r, (s, off) in enumerate(windows)}
    order = sorted(range(len(sentences)), key=lambda i: -len(sentences[i]["words"]))
    index = []
    for step in range(len(sentences[order[0]]["words"])):
        for i in order:
            if step < len(sentences[i]["words"]):
                off = step - step % max_len
                index.append(row[(i, off)] * t + step - off)
    return index


def main():
    args = reference.parser().parse_args()
    device, spec = reference.setup(args)
    tc, ec = spec["config"], spec["encoder"]
    model = FineTune(tc, ec).to(device)
    opt = torch.optim.Adam([
        {"params": model.tagger.parameters()},
        {"params": model.encoder.parameters(), "lr": tc["encoder_lr"]},
    ], lr=tc["lr"])
    batches = []
    for sentences, enc in zip(spec["batches"], spec["encoder_batches"]):
        b = reference_tagger.packed(sentences, tc["tags"], device)
        b["enc"] = reference_encoder.tensors(enc, device)
        b["enc_index"] = torch.tensor(encoder_index(sentences, enc["windows"], enc["t"], ec["max_len"]), device=device)
        batches.append(b)

    def train(bs):
        model.train()
        for b in bs:
            opt.zero_grad()
            loss = model.tagger.loss(model.hidden(b), b)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), tc["clip"])
            opt.step()

    def predict(bs):
        model.eval()
        with torch.no_grad():
            for b in bs:
                probs, _ = model.tagger.probabilities(model.hidden(b), b)
                probs.tolist()

    reference.serve("reference_finetune", device, batches, args.warmup, train, predict,
                    ready={"fused_attention": reference_encoder.FUSED,
                           "params": sum(p.numel() for p in model.parameters())},
                    torch_note=" (fused attention)" if reference_encoder.FUSED else "")


if __name__ == "__main__":
    main()
