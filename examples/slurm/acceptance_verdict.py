"""The acceptance job's verdict: the bus bandwidth of the largest message in a collective test's output (nccl-tests
all_reduce_perf or Neuron's nccom-test), beside the figure the type's EFA allows; exit 1 below the stated fraction.

    python3 acceptance_verdict.py --format nccl LOG --expected-gbs 400 --min-fraction 0.4 [--instance-type p5.48xlarge]

The largest message, not the tests' "Avg bus bandwidth": that averages every size, small ones included, whose time is
latency (both tools' documentation). With one node the collective never crosses EFA: the figure is shown, not judged.
"""

from __future__ import annotations

import argparse
import sys


def largest_message_busbw(text: str, fmt: str) -> tuple[int, float] | None:
    """(size in bytes, bus bandwidth GB/s) of the largest size row. nccl-tests rows end with the in-place
    `time algbw busbw #wrong`; nccom-test rows with `time algbw busbw`."""
    best = None
    for line in text.splitlines():
        words = line.split()
        if len(words) < 6 or not words[0].isdigit() or line.lstrip().startswith("#"):
            continue
        try:
            size, busbw = int(words[0]), float(words[-2] if fmt == "nccl" else words[-1])
        except ValueError:
            continue
        if best is None or size >= best[0]:
            best = (size, busbw)
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("log")
    p.add_argument("--format", choices=("nccl", "nccom"), required=True)
    p.add_argument("--expected-gbs", type=float, required=True)
    p.add_argument("--min-fraction", type=float, required=True)
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--instance-type", default="this type")
    args = p.parse_args(argv)
    with open(args.log) as f:
        found = largest_message_busbw(f.read(), args.format)
    if found is None:
        print("acceptance FAILED: the test printed no result rows (see the log above)")
        return 1
    size, busbw = found
    share = busbw / args.expected_gbs
    line = (f"bus bandwidth at {size / 2**20:,.0f} MiB: measured {busbw:.1f} GB/s, expected up to "
            f"{args.expected_gbs:.1f} GB/s for {args.instance_type} (its EFA line rate), {share:.0%}")
    if args.nodes < 2:
        print(f"{line}; one node: the collective did not cross EFA, so it is not judged (run on 2+ nodes)")
        return 0
    if share < args.min_fraction:
        print(f"acceptance FAILED: {line}, below the stated {args.min_fraction:.0%}")
        return 1
    print(f"acceptance passed: {line} (at least {args.min_fraction:.0%} required)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
