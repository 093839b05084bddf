"""The PyTorch side of package refbench's protocol, shared by the reference
scripts (train/*/testdata/reference_*.py).

A script parses its arguments with parser(), builds its model and batches,
and hands serve() a function that trains on a list of batches and one that
predicts them: serve() warms both up, prints {"ready": true, ...}, and then
times one pass of each over the rest of the batches for every line "round"
read on standard input, printing the throughputs as one line of JSON.
"""

import argparse
import json
import sys
import time

import torch


def parser():
    ap = argparse.ArgumentParser()
    ap.add_argument("batches")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    return ap


def setup(args):
    """Sets the thread count and the seed; returns the device and the spec."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    with open(args.batches) as f:
        spec = json.load(f)
    return torch.device(args.device), spec


def peak_rss():
    """The process's peak resident memory (VmHWM). ru_maxrss would not do:
    Linux carries it over from the parent across fork and exec."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def serve(name, device, batches, warmup, train, predict, ready=None, torch_note=""):
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def timed(f, bs):
        sync()
        wall, cpu = time.perf_counter(), time.process_time()
        f(bs)
        sync()
        return time.perf_counter() - wall, time.process_time() - cpu

    train(batches[:warmup])
    predict(batches[:warmup])
    bs = batches[warmup:]
    tokens = sum(b["tokens"] for b in bs)
    # One timed round per line read, so that the caller can alternate its
    # own rounds with these without paying for a Python start in between.
    print(json.dumps({"ready": True, "threads": torch.get_num_threads(), "torch": torch.__version__, **(ready or {})}),
          flush=True)
    for line in sys.stdin:
        if line.strip() != "round":
            sys.exit(f"{name}: unknown request {line.strip()!r}")
        train_s, train_cpu = timed(train, bs)
        predict_s, predict_cpu = timed(predict, bs)
        print(json.dumps({
            "train_tokens_per_sec": tokens / train_s,
            "predict_tokens_per_sec": tokens / predict_s,
            "train_tokens_per_cpu_sec": tokens / train_cpu,
            "predict_tokens_per_cpu_sec": tokens / predict_cpu,
            "peak_rss_bytes": peak_rss(),
            "threads": torch.get_num_threads(),
            "torch": torch.__version__ + torch_note,
        }), flush=True)
