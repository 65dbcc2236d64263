"""`python -m workloads`: the plan and its cost, before anything is deployed.

    python -m workloads plan huge
    python -m workloads plan my.yaml -c training.instance_type=p5.48xlarge --json
    python -m workloads catalog
    python -m workloads preflight huge          # the account checked against the plan, before cdk deploy
    python -m workloads cost huge --month 2026-10   # what the estate cost (Cost Explorer) beside the plan
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from ..catalog import PRICED_REGIONS, load_catalog
from ..config.loader import DEFAULT_WORKLOAD, command_args, load
from ..errors import ConfigError, raise_all, repeated_keys, report, strict
from ..planning import layout
from ..planning.planner import Plan, plan
from .estate_commands import against_aws, invoke_endpoint, promote, run_job
from .image_pins import with_pin_finding

EXIT_BAD_INPUT = 2


def parse_overrides(pairs: list[str], *, command: str = "plan") -> dict[str, str]:
    """`-c KEY=VALUE` options as a dict: every malformed pair, repeated key and app-only key refused at once."""

    out, errors, given = {}, [], []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            errors.append(ConfigError("-c", pair, "KEY=VALUE with a dotted key, e.g. training.instance_type=p5.48xlarge",
                                      reason="not a KEY=VALUE pair"))
            continue
        given.append((key, value))
        out[key] = value
    errors += repeated_keys(given) + _app_key_errors(out, command)
    raise_all(errors)
    return out


def _app_key_errors(overrides: dict[str, str], command: str) -> list[ConfigError]:
    """`cdk synth`'s own context keys given to `python -m workloads`, where they mean something else or nothing."""
    said = {
        "workload": ("the command's argument: python -m workloads {command} " + overrides.get("workload", "WORKLOAD"),
                     "the workload is the command's argument here, not a -c key"),
        "strict": ("--strict" if command == "plan" else "-c strict=true with cdk synth",
                   "-c strict is cdk synth's; python -m workloads plan takes --strict"),
        "account": ("-c account=ID with cdk synth or cdk deploy", "the account is cdk synth's and cdk deploy's"),
    }
    return [ConfigError(f"-c {key}", overrides[key], allowed.format(command=command), reason=reason)
            for key, (allowed, reason) in said.items() if key in overrides]


# Numeric options, each with what it takes: argparse reads `--timeout -5` and `--timeout nan` as numbers (cost's --runs
# is checked by cost.check_arguments).
_NUMBER_OPTIONS = {
    "timeout": ("--timeout", lambda v: math.isfinite(v) and v > 0, "seconds, a number > 0"),
    "instance_count": ("--instance-count", lambda v: v >= 1, "a whole number >= 1"),
}


def _option_errors(args: argparse.Namespace) -> list[ConfigError]:
    return [ConfigError(flag, getattr(args, dest), allowed, reason="out of range")
            for dest, (flag, valid, allowed) in _NUMBER_OPTIONS.items()
            if getattr(args, dest, None) is not None and not valid(getattr(args, dest))]


def _workload(args: argparse.Namespace) -> str:
    """The workload argument; the default said on stderr, so that `plan` alone is not mistaken for a plan of nothing."""
    if args.workload is None:
        print(f"{args.command}: no workload named, so the default preset {DEFAULT_WORKLOAD!r} (name a preset or a "
              ".yaml file: python -m workloads plan small)", file=sys.stderr)
        args.workload = DEFAULT_WORKLOAD
    return args.workload


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m workloads", description="Plan an ML estate from a workload config.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="show the instance choices, the reasons and the cost")
    p.add_argument("workload", nargs="?", help="preset name or path to a .yaml file (default: "
                   f"{DEFAULT_WORKLOAD}, the largest preset)")
    p.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config field, e.g. -c training.instance_count=8")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--full", action="store_true", help="the whole plan: every candidate, the serving contract, the "
                   "estate's monthly lines, each warning and note in full with its source (default: one screen)")
    p.add_argument("--html", metavar="FILE", help="also write the plan as one page that opens offline: the summary, "
                   "charts of the training candidates, the month's cost and a day of the serving fleet, the tables")
    p.add_argument("--strict", action="store_true", help="refuse warnings as errors (exit 2), for CI pipelines")
    p.add_argument("--calibrate", metavar="RESULT.json", help="the calibration job's result: its measured speed beside "
                   "the plan's, and the run's time and cost recomputed from it")
    sub.add_parser("catalog", help="list the instance catalog with sources")
    rp = sub.add_parser("prices", help="refresh the catalog's EC2 and SageMaker prices from the AWS Price List "
                        "(read-only, your AWS credentials); the planner reads them over the shipped figures")
    rp.add_argument("action", choices=("refresh",))
    rp.add_argument("--regions", default=",".join(PRICED_REGIONS), help="comma-separated regions (default: %(default)s)")
    fp = sub.add_parser("preflight", help="check the account before cdk deploy: zones, offerings, quotas, capacity, "
                        "artifacts, CDK bootstrap, cost allocation tags, images (read-only, your AWS credentials)")
    fp.add_argument("workload", nargs="?", help="preset name or path to a .yaml file (default: "
                   f"{DEFAULT_WORKLOAD}, the largest preset)")
    fp.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config field; -c teams=FILE -c team=NAME checks that team's estate")
    cp = sub.add_parser("cost", help="what the estate really cost (Cost Explorer, by its tags), service by service "
                        "beside the plan's monthly estimate (read-only, your AWS credentials)")
    cp.add_argument("workload", nargs="?", help="preset name or path to a .yaml file (default: "
                   f"{DEFAULT_WORKLOAD}, the largest preset)")
    cp.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config field; -c teams=FILE [-c team=NAME]: each team's estate (or one)")
    cp.add_argument("--month", help="YYYY-MM (default: this month, so far)")
    cp.add_argument("--runs", type=int, default=1, help="training runs to count in the plan's figure (default 1)")
    cp.add_argument("--json", action="store_true", help="machine-readable output")

    def job_parser(name: str, help_text: str) -> argparse.ArgumentParser:
        jp = sub.add_parser(name, help=help_text)
        jp.add_argument("workload", help="preset name or path to a .yaml file")
        jp.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config field as at plan time, e.g. -c training.instance_count=8 (the same "
                        "-c options the estate was deployed with)")
        jp.add_argument("--stage", default="", help="team stage the stacks belong to (stack name prefix)")
        return jp

    sp = job_parser("submit", "start a SageMaker training job as planned (uses your AWS credentials)")
    sp.add_argument("--entry-point", help="training script, relative to --source-dir (default: the shipped one for "
                    "the workload: examples/slurm/train.py for a language model, examples/classic/xgboost_train.py, "
                    "examples/classic/sklearn_train.py)")
    sp.add_argument("--source-dir", help="folder uploaded with the job (default: the shipped script's)")
    sp.add_argument("--wait", action="store_true", help="follow the job until it ends, a line per status change "
                    "(exit 0 when it completed, 1 otherwise; Ctrl-C stops following, not the job)")
    mp = job_parser("promote", "copy a finished training job's model to the keys the endpoints read")
    mp.add_argument("--job", required=True, help="the training job's name (what `submit` printed)")
    pp = job_parser("process", "start a SageMaker Processing job sharded over several instances")
    pp.add_argument("--code", required=True, help="processing script")
    pp.add_argument("--input", default=layout.DATASETS, help="input prefix in the dataset bucket, under "
                    + " or ".join(layout.PROCESSING_READS))
    pp.add_argument("--output", default=layout.PROCESSED, help="output prefix in the dataset bucket, under "
                    + " or ".join(layout.PROCESSING_WRITES))
    pp.add_argument("--instance-type", default="ml.m5.xlarge")
    pp.add_argument("--instance-count", type=int, default=4)
    ip = job_parser("invoke", "send one request to a deployed real-time, serverless or async endpoint")
    ip.add_argument("--kind", choices=("realtime", "serverless", "async"), help="default: the first the plan has")
    body = ip.add_mutually_exclusive_group()
    body.add_argument("--data", help="request body (default: the serving contract's sample request)")
    body.add_argument("--body", help="file with the request body")
    ip.add_argument("--content-type", help="default: what the endpoint's container reads (its serving contract)")
    ip.add_argument("--timeout", type=float, default=600, help="seconds to wait for an async result")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "catalog":
            from .report import print_catalog
            print_catalog(load_catalog())
            return 0
        if args.command == "prices":
            return _prices(args)
        overrides = parse_overrides(args.context, command=args.command)
        raise_all(_option_errors(args))
        if not {"teams", "team"} & set(overrides):  # a team's workload is its entry's
            _workload(args)
        args.overrides = overrides  # what a "not deployed" line repeats in its cdk deploy command
        if args.command == "preflight":
            return _preflight(args, overrides)
        if args.command == "cost":
            return _cost(args, overrides)
        if args.command == "plan" and ({"teams", "team"} & set(overrides)):
            result, budget = _team_plan(overrides)
            result = with_pin_finding(result, workload_args=" ".join(f"-c {k}={overrides[k]}" for k in ("teams", "team")))
            if getattr(args, "strict", False):
                strict(result.findings)
            _show(result, args, budget=budget)
            return 0
        result = plan(load(args.workload, overrides))
        if args.command == "plan":  # the images a deploy of it would pull by tag only (image_pins)
            result = with_pin_finding(result, workload_args=command_args(args.workload, overrides))
        if getattr(args, "strict", False):
            strict(result.findings)
        calibrated = None
        if getattr(args, "calibrate", None):
            from ..planning.calibration import calibrate, read_result
            calibrated = calibrate(result.training, read_result(args.calibrate))
        if args.command in ("submit", "process"):
            return run_job(args, result)
        if args.command == "promote":
            return promote(args, result)
        if args.command == "invoke":
            return invoke_endpoint(args, result)
    except ConfigError as exc:
        report(exc)
        return EXIT_BAD_INPUT
    if getattr(args, "html", None):
        try:
            from .plan_page import write  # only here: the plain plan never imports it
            write(result, args.html)
        except OSError as exc:
            why = "a folder, not a file" if isinstance(exc, IsADirectoryError) else \
                f"no folder {Path(args.html).parent}" if isinstance(exc, FileNotFoundError) else \
                "not writable here" if isinstance(exc, PermissionError) else (exc.strerror or type(exc).__name__)
            report(ConfigError("--html", args.html, "a file path in a folder you can write, e.g. plan.html",
                               reason=why))
            return EXIT_BAD_INPUT
        print(f"wrote {args.html}: the plan as a page (opens offline)", file=sys.stderr)
    _show(result, args, calibrated=calibrated)
    return 0


def _prices(args: argparse.Namespace) -> int:
    regions = tuple(r.strip() for r in args.regions.split(",") if r.strip())
    unknown = [r for r in regions if r not in load_catalog().regions]
    if unknown or not regions:
        raise ConfigError("--regions", args.regions, "comma-separated AWS regions the catalog knows, e.g. us-east-1",
                          reason=f"unknown: {', '.join(unknown)}" if unknown else "none given")

    def run() -> None:
        import boto3

        from . import prices

        cat = load_catalog()
        client = boto3.session.Session().client("pricing", region_name=prices.PRICING_REGION)
        result = prices.refresh(client, cat, regions=regions)
        print("\n".join(prices.summary(result, cat, prices.write(result))))
    return against_aws(run)


def _preflight(args: argparse.Namespace, overrides: dict[str, str]) -> int:
    """The plan's checks against the account: every finding in one table, one line each for errors and warnings on
    stderr; exit 2 when any is an ERROR."""
    from ..errors import ERROR, report_findings

    if {"teams", "team"} & set(overrides):
        result, team = _team_plan(overrides)[0], overrides["team"]  # a team's stacks are named after its stage
    else:
        result, team = plan(load(args.workload, overrides)), ""
    findings: list = []

    def run() -> None:
        from .preflight import Account, preflight
        from .report import print_preflight

        findings.extend(preflight(result, Account(result.workload.region, stage=team)))
        print_preflight(result, findings, stage=team)
    status = against_aws(run)
    if status:
        return status
    report_findings(findings, errors=True)
    return EXIT_BAD_INPUT if any(f.level == ERROR for f in findings) else 0


def _cost(args: argparse.Namespace, overrides: dict[str, str]) -> int:
    """Each estate asked (one workload, a team, or every team of a teams file): Cost Explorer's month beside the
    plan; bad input is refused before any AWS call."""
    from datetime import date

    from .cost import check_arguments, cost_facts, cost_report

    today = date.today()
    check_arguments(month=args.month, runs=args.runs, today=today)
    if "teams" in overrides and "team" not in overrides and len(overrides) == 1:
        from ..planning.teams import load_teams
        estates = [(s.plan, s.team.name) for s in load_teams(overrides["teams"])]
    elif {"teams", "team"} & set(overrides):
        estates = [(_team_plan(overrides)[0], overrides["team"])]
    else:
        estates = [(plan(load(args.workload, overrides)), None)]
    reports: list = []

    def run() -> None:
        import boto3

        from .report import print_cost

        client = boto3.session.Session().client("ce", region_name=cost_facts()["region"])
        for i, (result, team) in enumerate(estates, 1):
            print(f"cost: asking Cost Explorer for {team or result.workload.name} ({i} of {len(estates)}) ...",
                  file=sys.stderr, flush=True)
            reports.append(cost_report(result, client, month=args.month, team=team, runs=args.runs, today=today))
        if args.json:
            json.dump([r.as_dict() for r in reports], sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            for r in reports:
                print_cost(r)
    return against_aws(run)


def _team_plan(overrides: dict[str, str]) -> tuple[Plan, dict]:
    """`-c teams=FILE -c team=NAME`: that team's plan, within its families, against its monthly budget."""
    from ..planning.teams import load_teams

    missing = [k for k in ("teams", "team") if k not in overrides]
    others = sorted(set(overrides) - {"teams", "team"})
    if missing == ["team"] and not others:
        from ..planning.teams import team_names

        raise ConfigError("-c team", None, f"-c team=NAME, one of: {', '.join(team_names(overrides['teams']))}",
                          reason="`-c team=NAME` is missing: a plan is one team's (`cost` takes every team)")
    if missing or others:
        raise ConfigError("-c", ", ".join(missing or others), "-c teams=FILE -c team=NAME and nothing else (change "
                          "the team's overrides in its file)", reason="a team's plan is planned from its teams file")
    stamped = load_teams(overrides["teams"], only=overrides["team"])[0]
    t, m = stamped.team, stamped.plan.monthly
    month = m.headline_usd if m and m.headline_usd is not None else (m.usd_month if m else None)
    budget = {"team": t.name, "allowed_instance_families": list(t.allowed_instance_families),
              "monthly_budget_usd": t.budget.monthly_usd, "monthly_estimate_usd": month,
              "estimate_is": (f"a month of the estate with its {m.training_runs:,.1f} training runs" if m and
                              m.training_runs and m.headline_usd is not None else
                              "one training run plus a month of the estate" if m and m.headline_usd is not None
                              else "a month of the estate (training run not priced)"),
              "fits_budget": None if month is None else month <= t.budget.monthly_usd,
              "largest_lines": _largest_lines(m)}
    return stamped.plan, budget


def _largest_lines(m, n: int = 3) -> list[str]:
    """The estimate's largest monthly lines, largest first: what to cut when a team's plan exceeds its budget."""
    if m is None:
        return []
    lines = [(m.training_run_usd, "one training run", "")] if m.training_run_usd else []
    lines += [(line.usd, line.item, line.quantity) for line in m.lines if line.usd > 0]
    return [f"{item} ${usd:,.0f}" + (f" ({quantity})" if quantity else "")
            for usd, item, quantity in sorted(lines, key=lambda x: -x[0])[:n]]


def _show(result: Plan, args: argparse.Namespace, *, budget: dict | None = None, calibrated=None) -> None:
    if args.json:
        out = result.to_dict()
        if budget:
            out["team"] = budget
        if calibrated:
            out["calibration"] = calibrated.to_dict()
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    from .report import print_plan, print_team_budget
    if args.full:
        print_plan(result, budget=budget)
    else:
        from ..config.loader import command_args
        from .short_plan import print_short_plan
        given = command_args(args.workload, args.overrides) if args.workload else \
            " ".join(f"-c {k}={v}" for k, v in args.overrides.items())
        context = {"workload": args.workload, **args.overrides} if args.workload else dict(args.overrides)
        print_short_plan(result, given=given, context=context, budget=budget)
    if budget:
        print_team_budget(budget)
    if calibrated:
        from .calibration_report import print_calibration
        print_calibration(result, calibrated)
