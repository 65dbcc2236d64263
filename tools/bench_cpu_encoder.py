"""How fast one vCPU runs a BERT-class encoder on 512-token requests (a benchmark to run by hand, not a test;
its results are recorded in workloads/catalog/serving.yaml as `cpu_encoder`).

    python -m tools.bench_cpu_encoder [--repeats 10] [--out FILE]

The planner prices a framework-archive model on a CPU instance at 2 x parameters x 512 tokens a request
(workloads/planning/speed.py); this measures what that request costs one vCPU: a Transformer encoder with BERT-base
and BERT-large shapes (random weights: the arithmetic does not depend on them), fp32, batch 1, one thread
pinned to one vCPU, PyTorch's own CPU kernels (the project's PyTorch, requirements-dev.txt). A serving stack
adds its HTTP and decoding time, small next to a forward pass of a tenth of a second or more.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

from .machine import describe

TOKENS = 512
VOCAB = 30_522  # BERT's WordPiece vocabulary
# (name, layers, hidden, heads): bert-base-uncased and bert-large-uncased.
SHAPES = (("bert-base", 12, 768, 12), ("bert-large", 24, 1024, 16))


def encoder(layers: int, hidden: int, heads: int) -> torch.nn.Module:
    layer = torch.nn.TransformerEncoderLayer(hidden, heads, dim_feedforward=4 * hidden, batch_first=True)
    return torch.nn.Sequential(torch.nn.Embedding(VOCAB, hidden), torch.nn.TransformerEncoder(layer, layers))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", help="also write the results here as JSON")
    args = parser.parse_args()
    os.sched_setaffinity(0, {0})
    torch.set_num_threads(1)
    torch.manual_seed(0)
    out = {"machine": describe(), "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%d"), "tokens": TOKENS, "figures": []}
    for name, layers, hidden, heads in SHAPES:
        model = encoder(layers, hidden, heads).eval()
        params = sum(p.numel() for p in model.parameters())
        ids = torch.randint(0, VOCAB, (1, TOKENS))
        times = []
        with torch.inference_mode():
            model(ids)  # first call allocates
            for _ in range(args.repeats):
                start = time.perf_counter()
                model(ids)
                times.append(time.perf_counter() - start)
        seconds = statistics.median(times)
        out["figures"].append({"name": name, "parameters_billion": round(params / 1e9, 4),
                               "request_ms": round(seconds * 1e3, 1),
                               # the planner's FLOPs per request over the measured time
                               "gflops_per_vcpu": round(2 * params * TOKENS / seconds / 1e9, 1),
                               "times_ms": [round(t * 1e3, 1) for t in times]})
        print(json.dumps(out["figures"][-1]), flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
