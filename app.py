#!/usr/bin/env python3
"""CDK entry point: read context once, load and plan the workload, build the stacks.

    cdk synth -c workload=huge -c training.instance_type=p5.48xlarge
    python app.py        # the same synthesis with cdk.json's context, into cdk.out

The CDK CLI hands the app its context (cdk.json's, then -c) in CDK_CONTEXT_JSON. Run alone, the
app reads cdk.json itself, so the feature flags are the same as under `cdk synth`.
"""

from __future__ import annotations

from workloads.commands.interrupt import quiet_interrupts

quiet_interrupts()  # first: Ctrl-C in `cdk synth` stops the app without a traceback, a pending one (app.sh) included

from workloads.method_cache import install  # noqa: E402

install()  # before the imports below define their dataclasses (workloads/method_cache.py)

import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

STARTED = time.perf_counter()


CDK_JSON = Path(__file__).resolve().parent / "cdk.json"
# Set by a caller that has printed the plan's warnings already (tools/demo.py, before its deploys): each once.
SHOWN = "WORKLOADS_WARNINGS_SHOWN"
WORKER = os.environ.get("ML_ESTATE_SYNTH_SHARD", "")  # set in a worker of a teams file's synthesis (synth_workers)


def say(what: str) -> None:
    """A line on stderr per stage, with the seconds since start: a synthesis is tens of seconds of work, and the CDK
    CLI shows nothing of its own meanwhile (issue 43: 13-35 s of silence)."""
    worker = f" [worker {WORKER}]" if WORKER else ""
    print(f"synth{worker}: {what} ({time.perf_counter() - STARTED:.1f} s)", file=sys.stderr, flush=True)


def _warn(target) -> None:
    """Each warning in a line (its headline), then the command that shows them whole with their sources."""
    from workloads.errors import report_findings

    if os.environ.get(SHOWN) == "1":
        n = sum(1 for f in target.findings if f.level == "WARNING")
        if n:
            say(f"{n} warning{'s' if n != 1 else ''}, shown with the plan above")
        return
    detail = f"python -m workloads plan {target.workload_args} --full" if target.plan is not None else \
        "python -m workloads plan -c teams=FILE -c team=NAME --full"
    report_findings(target.findings, detail=detail)


def in_workers() -> int | None:
    """A teams file with teams enough for several worker processes (workloads/commands/synth_workers.py): planned,
    checked and warned about here once, built by the workers, their assemblies merged; the exit status. None: this
    process builds everything (one workload, or too few teams for the cores). Runs before the CDK's imports, which
    this process then never needs."""
    from workloads import ConfigError
    from workloads.commands import synth_workers
    from workloads.commands.context import cdk_cli_context, read_context
    from workloads.errors import report
    from workloads.planning.teams import shared_stack_id

    cdk_context = json.loads(CDK_JSON.read_text())["context"]
    context = synth_workers.raw_context(cdk_context)
    if not context or not context.get("teams"):
        return None
    try:
        target = read_context(context, cdk_keys=cdk_context, given=cdk_cli_context() or ())
        workers = synth_workers.workers_for(len(target.teams))
    except ConfigError as exc:
        report(exc)
        return 2
    except ValueError as exc:  # the workers' variable
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if workers < 2:
        return None
    _warn(target)
    say(f"planned {len(target.teams)} team(s); building the stacks in {workers} processes")
    outdir = Path(os.environ.get("CDK_OUTDIR") or CDK_JSON.parent / "cdk.out").resolve()  # workers run elsewhere
    shared = dict.fromkeys(shared_stack_id(s.team.account, s.team.region) for s in target.teams)
    code = synth_workers.run_workers(app=Path(__file__).resolve(), context=context, outdir=outdir, workers=workers,
                                     env={**os.environ, SHOWN: "1"},
                                     order=[*shared, *(s.team.name for s in target.teams), "Tree"])
    if code == 0:
        say(f"done: templates in {outdir}")
    return code


if __name__ == "__main__" and not WORKER:
    _code = in_workers()
    if _code is not None:
        sys.exit(_code)

say("loading the CDK libraries")

# The imports below make about 250,000 objects that live as long as the process (mostly the CDK's classes) and no
# garbage: the collector's passes over them were a fifth of the app's own CPU time (docs/performance.md). Collect
# nothing while importing, then leave those objects out of every later collection.
gc.disable()

import aws_cdk as cdk  # noqa: E402

from stacks.build import build  # noqa: E402
from workloads import ConfigError  # noqa: E402
from workloads.commands import synth_workers  # noqa: E402
from workloads.commands.context import cdk_cli_context, read_context  # noqa: E402
from workloads.errors import report  # noqa: E402

gc.freeze()
gc.enable()


def without_jsii_type_checks() -> None:
    """jsii's runtime check of each argument against its declared type (typeguard, under `if __debug__`) made a seventh
    of the app's own CPU time in a 50-team synthesis. They catch a programming error, not bad input (the workload is
    validated before any construct is made), and the tests, which synthesize through stacks.build, keep them; the
    app runs as under `python -O`, which jsii documents as the way to turn them off (it would need optimized bytecode
    of all site-packages here). jsii's node process still checks every value it receives against the type."""
    import jsii._type_checking as checks

    if hasattr(checks, "_resolved_check"):  # jsii 1.142's hook; another jsii keeps its checks
        checks._resolved_check = lambda **_: None


def main(*, one_shot: bool = False) -> int:
    """`one_shot`: this process does nothing after the synthesis (`python app.py`, the CDK CLI's way), so it skips
    jsii's type checks and the garbage collector; a caller that goes on (a test) keeps both."""
    if one_shot:
        without_jsii_type_checks()
        # Nor during the build: a synthesis is one short process whose objects mostly live until it ends, and the
        # collector found next to nothing to free (50 teams: the same peak memory, 860 MB, with it off) for 15% of
        # the app's own CPU time.
        gc.disable()
    cdk_context = json.loads(CDK_JSON.read_text())["context"]
    if "CDK_CONTEXT_JSON" in os.environ:  # run by the CDK CLI
        app = cdk.App()
    else:
        print(f"python app.py: cdk.json's context, synthesizing into {CDK_JSON.parent / 'cdk.out'} "
              "(cdk synth -c KEY=VALUE takes overrides)", file=sys.stderr)
        app = cdk.App(context=cdk_context, outdir=str(CDK_JSON.parent / "cdk.out"))
    try:
        # A worker: the parent has checked the `-c` pairs and shown the warnings (in_workers).
        given = () if WORKER else cdk_cli_context() or ()
        target = read_context(app.node.get_all_context(), cdk_keys=cdk_context, given=given)
        if not WORKER:
            _warn(target)  # warnings on stderr, one line each; the synthesis goes on
        index, count = synth_workers.shard()
        what = target.plan.workload.name if target.plan else f"{len(target.teams)} team(s)"
        share = f" of {len(target.teams[index::count])} of them" if count > 1 else ""
        say(f"planned {what}; building the stacks{share}")
        build(app, target, shard=(index, count))
    except ConfigError as exc:
        # One line, no traceback, nothing written: bad input never reaches CloudFormation.
        report(exc)
        return 2
    say("checking the stacks (cdk-nag) and writing the templates")
    app.synth()
    say("done" if WORKER else f"done: templates in {app.outdir}")  # a worker's folder is merged, then goes
    return 0


if __name__ == "__main__":
    sys.exit(main(one_shot=True))
