#!/usr/bin/python3
"""Reference implementation of nerflow's tagger in PyTorch, for benchmarks.

The Go benchmark (train/bench_test.go) writes the batches it trains on to a
JSON file; this script builds the same architecture -- word vectors, a
character CNN with max pooling, casing vectors, a bidirectional LSTM over
packed sequences, RoSTER's token head or a linear-chain CRF -- trains it on
the same batches with Adam and gradient clipping and predicts them (for the
CRF, Viterbi paths and marginals, as the Go side). Once set up and warmed it
prints {"ready": true, ...}; then, for each line "round" on its standard
input, it times one pass of training and one of prediction over the batches
and prints the throughput by wall clock and by CPU time, and peak memory, as
one line of JSON. Run with Debian's python3-torch, or on a GPU machine with
its CUDA PyTorch (--device cuda:0).
"""

import os
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import PackedSequence

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "internal", "refbench"))
import reference  # noqa: E402  (package refbench's protocol)


class Tagger(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.word = nn.Embedding(c["words"], c["word_dim"])
        # Padding (id 0) has a zero vector that gets no gradient, as the Go side.
        self.char = nn.Embedding(c["chars"], c["char_dim"], padding_idx=0)
        self.casing = nn.Embedding(c["casings"], c["casing_dim"])
        self.conv = nn.Conv1d(c["char_dim"], c["char_filters"], c["char_kernel"], padding=c["char_kernel"] // 2)
        # A fine-tuned encoder's states join the word representation
        # (encoder placement "under"; train/encoder/testdata/reference_finetune.py).
        inp = c["word_dim"] + c["char_filters"] + c["casing_dim"] + c.get("encoder_dim", 0)
        self.lstm = nn.LSTM(inp, c["hidden"], num_layers=1, bidirectional=True)
        self.drop = nn.Dropout(c["dropout"])
        k, h = c["tags"], 2 * c["hidden"]
        if c["head"] == "crf":
            self.emit = nn.Linear(h, k)
            self.trans = nn.Parameter(torch.zeros(k, k))
            self.start = nn.Parameter(torch.zeros(k))
            self.end = nn.Parameter(torch.zeros(k))
        else:
            self.typ = nn.Linear(h, k - 1)
            self.ent = nn.Linear(h, 1)

    def encode(self, b, states=None):
        n = b["words"].shape[0]
        ce = self.char(b["chars"].view(-1)).view(n, -1, self.c["char_dim"]).transpose(1, 2)
        feat = (self.conv(ce) + b["char_mask"].unsqueeze(1)).amax(2)
        parts = [self.word(b["words"]), feat, self.casing(b["casing"])]
        x = torch.cat(parts + ([states] if states is not None else []), 1)
        out, _ = self.lstm(PackedSequence(self.drop(x), b["batch_sizes"]))
        return self.drop(out.data)

    def log_partition(self, em, b):
        sizes, offsets = b["sizes"], b["offsets"]
        alpha = em[0:sizes[0]] + self.start
        done = []
        for t in range(1, len(sizes)):
            bs, prev = sizes[t], sizes[t - 1]
            if bs < prev:
                done.append(torch.logsumexp(alpha[bs:prev] + self.end, 1))
                alpha = alpha[:bs]
            alpha = torch.logsumexp(alpha.unsqueeze(2) + self.trans.unsqueeze(0), 1) + em[offsets[t]:offsets[t] + bs]
        done.append(torch.logsumexp(alpha + self.end, 1))
        return torch.cat(done).sum()

    def loss(self, h, b):
        if self.c["head"] == "crf":
            em = self.emit(h)
            k = em.shape[1]
            gold = (em.view(-1)[b["emit_idx"]].sum() + self.start[b["firsts"]].sum() + self.end[b["lasts"]].sum()
                    + self.trans.view(-1)[b["moves"]].sum())
            return (self.log_partition(em, b) - gold) / b["sentences"]
        ent = torch.cat([torch.zeros_like(h[:, :1]), self.ent(h)], 1)
        return F.cross_entropy(ent, b["entity"]) + (F.cross_entropy(self.typ(h), b["type"], reduction="none") * b["type_w"]).sum() / b["type_w"].sum().clamp(min=1)

    def probabilities(self, h, b):
        """Per-token tag distributions and, for the CRF, the Viterbi paths."""
        if self.c["head"] != "crf":
            p = torch.sigmoid(self.ent(h))
            return torch.cat([1 - p, F.softmax(self.typ(h), 1) * p], 1), None
        em = self.emit(h)
        # Marginals are the gradient of log Z with respect to the emissions.
        with torch.enable_grad():
            leaf = em.detach().requires_grad_()
            marginals, = torch.autograd.grad(self.log_partition(leaf, b), leaf)
        return marginals, self.viterbi(em, b)

    def viterbi(self, em, b):
        sizes, offsets = b["sizes"], b["offsets"]
        score = em[0:sizes[0]] + self.start
        backs, finals = [], [None] * sizes[0]
        for t in range(1, len(sizes)):
            bs, prev = sizes[t], sizes[t - 1]
            for i in range(bs, prev):
                finals[i] = score[i]
            best, arg = (score[:bs].unsqueeze(2) + self.trans.unsqueeze(0)).max(1)
            backs.append(arg.cpu())
            score = best + em[offsets[t]:offsets[t] + bs]
        for i in range(sizes[-1]):
            finals[i] = score[i]
        last = (torch.stack(finals) + self.end).argmax(1).tolist()
        backs = [x.tolist() for x in backs]
        paths = []
        for i, tag in enumerate(last):
            n = sum(1 for s in sizes if s > i)
            path = [tag]
            for t in range(n - 1, 0, -1):
                tag = backs[t - 1][i][tag]
                path.append(tag)
            paths.append(path[::-1])
        return paths


def packed(batch, k, device):
    """Lays a batch of sentences out in packed order, as the Go side does."""
    sents = sorted(batch, key=lambda s: -len(s["words"]))
    steps = len(sents[0]["words"])
    sizes, offsets, order = [], [], []
    n = 0
    for t in range(steps):
        running = [i for i, s in enumerate(sents) if len(s["words"]) > t]
        sizes.append(len(running))
        offsets.append(n)
        order += [(i, t) for i in running]
        n += len(running)
    char_len = max(len(c) for s in sents for c in s["chars"])
    chars = torch.zeros(n, char_len, dtype=torch.long)
    mask = torch.zeros(n, char_len)
    words, casing, target = [], [], []
    for p, (i, t) in enumerate(order):
        s = sents[i]
        words.append(s["words"][t])
        casing.append(s["casing"][t])
        target.append(s["targets"][t])
        cs = s["chars"][t]
        chars[p, :len(cs)] = torch.tensor(cs)
        mask[p, len(cs):] = -1e4
    # The gold path's pieces, for its score by gathers (as the Go side).
    firsts, lasts, moves = [], [], []
    for i, s in enumerate(sents):
        tags = s["targets"]
        firsts.append(tags[0])
        lasts.append(tags[-1])
        moves += [tags[t - 1] * k + tags[t] for t in range(1, len(tags))]
    target = torch.tensor(target)
    b = {
        "words": torch.tensor(words), "casing": torch.tensor(casing), "chars": chars, "char_mask": mask,
        "emit_idx": torch.arange(n) * k + target, "firsts": torch.tensor(firsts), "lasts": torch.tensor(lasts),
        "moves": torch.tensor(moves, dtype=torch.long), "entity": (target > 0).long(), "type": (target - 1).clamp(min=0),
        "type_w": (target > 0).float(),
    }
    b = {name: x.to(device) for name, x in b.items()}
    # An RNN's batch sizes stay on the CPU.
    b.update({"batch_sizes": torch.tensor(sizes), "sizes": sizes, "offsets": offsets, "sentences": len(sents), "tokens": n})
    return b


def main():
    args = reference.parser().parse_args()
    device, spec = reference.setup(args)
    c = spec["config"]
    model = Tagger(c).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=c["lr"])
    batches = [packed(b, c["tags"], device) for b in spec["batches"]]

    def train(bs):
        model.train()
        for b in bs:
            opt.zero_grad()
            loss = model.loss(model.encode(b), b)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), c["clip"])
            opt.step()

    def predict(bs):
        model.eval()
        with torch.no_grad():
            for b in bs:
                probs, _ = model.probabilities(model.encode(b), b)
                probs.tolist()

    reference.serve("reference_tagger", device, batches, args.warmup, train, predict)


if __name__ == "__main__":
    main()
