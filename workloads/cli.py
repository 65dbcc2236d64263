"""`python -m workloads`: the plan and its cost, before anything is deployed.

    python -m workloads plan huge
    python -m workloads plan my.yaml -c training.instance_type=p5.48xlarge --json
    python -m workloads catalog
"""

from __future__ import annotations

import argparse
import json
import sys

from .catalog import load_catalog
from .errors import ConfigError
from .loader import DEFAULT_WORKLOAD, load
from .planner import Plan, plan

EXIT_BAD_INPUT = 2


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError("-c", pair, "KEY=VALUE with a dotted key, e.g. training.instance_type=p5.48xlarge",
                              reason="not a KEY=VALUE pair")
        out[key] = value
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m workloads", description="Plan an ML estate from a workload config.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="show the instance choices, the reasons and the cost")
    p.add_argument("workload", nargs="?", default=DEFAULT_WORKLOAD, help="preset name or path to a .yaml file")
    p.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config field, e.g. -c training.instance_count=8")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    sub.add_parser("catalog", help="list the instance catalog with sources")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "catalog":
            from .report import print_catalog
            print_catalog(load_catalog())
            return 0
        result = plan(load(args.workload, parse_overrides(args.context)))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    _show(result, as_json=args.json)
    return 0


def _show(result: Plan, *, as_json: bool) -> None:
    if as_json:
        json.dump(result.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    from .report import print_plan
    print_plan(result)
