"""`make demo`: plan a workload, then deploy its stacks to a local AWS emulator.

    WORKLOAD=huge python -m tools.demo

Starts moto on localhost, bootstraps it with the real CDK CLI, deploys in the real order (every
stack but the InferenceStack; a placeholder at each model artifact key; the InferenceStack, whose
artifact check then passes), prints the stack outputs and the resource types the emulator skipped,
stops the emulator. It cannot reach a real account: every call goes to the local endpoint with
throwaway credentials.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

from rich.console import Console
from rich.table import Table

from workloads import ConfigError
from workloads.commands.context import read_context
from workloads.errors import report
from workloads.commands.interrupt import die_of_sigint
from workloads.planning.planner import Plan
from workloads.planning.teams import load_teams
from workloads.commands.invoke import INVOCABLE, default_kind, invoke, sample_request
from workloads.commands.short_plan import print_short_plan

from .emulator import NotLocalError, deployed_resources, running


def demo_plan(workload: str, *, team: str | None, teams_file: str) -> tuple[Plan, list[str], str]:
    """The plan the demo shows, read as the app's synthesis reads it (context.read_context: its findings, the images
    deployed by tag only among them), the app's `-c` arguments, and a team's shared stack (deployed first; "" for a
    workload)."""
    if team:
        stamped = read_context({"teams": teams_file, "team": team}).teams[0]
        return stamped.plan, ["-c", f"teams={teams_file}", "-c", f"team={team}"], stamped.shared_stack
    return read_context({"workload": workload}).plan, ["-c", f"workload={workload}"], ""


def main() -> int:
    console = Console(width=150, highlight=False) if not sys.stdout.isatty() else Console(highlight=False)
    workload = os.environ.get("WORKLOAD") or "huge"
    team = os.environ.get("TEAM") or None
    teams_file = os.environ.get("TEAMS") or "config/teams.yaml"
    keep = os.environ.get("KEEP") == "1"  # `make emulator`: keep it running for the job and invoke commands
    try:
        the_plan, app_args, shared = demo_plan(workload, team=team, teams_file=teams_file)
    except ConfigError as exc:
        report(exc)
        return 2
    # The plan on one screen, each warning once in a line; the app's synthesis says only how many (app.SHOWN).
    context = {"teams": teams_file, "team": team} if team else {"workload": workload}
    print_short_plan(the_plan, console, given=" ".join(f"-c {k}={v}" for k, v in context.items()) if team else workload,
                     context=context)
    os.environ["WORKLOADS_WARNINGS_SHOWN"] = "1"  # the emulator's env() hands it to the CDK CLI and so to app.py
    region = the_plan.workload.region
    started = time.perf_counter()
    try:
        with running(region) as emulator:
            console.print(f"\n[bold]Local AWS emulator[/bold] at {emulator.endpoint} ({region}); bootstrapping...")
            emulator.bootstrap(quiet=True)
            emulator.deploy_estate(*app_args, plan=the_plan, stage=team or "", shared=shared,
                                   say=lambda line: console.print(f"\n[bold yellow]{line}[/bold yellow]"))
            reports = deployed_resources(emulator, emulator.cli_output)  # the assembly the CLI just deployed
            answer = _one_call(emulator, the_plan, stage=team or "")
            if keep:
                _print_reports(console, reports)
                _serve(console, emulator, workload=workload, team=team, teams_file=teams_file, app_args=app_args)
    except NotLocalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        if exc.returncode in (-signal.SIGINT, 128 + signal.SIGINT):  # the CLI took the same Ctrl-C first
            raise KeyboardInterrupt from None
        print(f"error: {' '.join(exc.cmd[1:3])} against the emulator failed (exit {exc.returncode}); see above",
              file=sys.stderr)
        return 1
    _print_reports(console, reports)
    if answer is not None:
        console.print(f"\n[bold]One call[/bold], as `python -m workloads invoke` makes it, to the {answer.kind} endpoint "
                      f"{answer.endpoint}: it answered {answer.body.decode(errors='replace')[:200]!r} "
                      "[dim](the emulator's canned response, the same to every call; a real endpoint runs the "
                      "model)[/dim]")
    real = (f"python -m workloads preflight -c teams={teams_file} -c team={team}, cdk deploy 'Shared-*' "
            f"-c teams={teams_file} once per account and region, cdk deploy '{team}/TrainStack' "
            f"'{team}/MlUsersStack' -c teams={teams_file}, upload the data, train and put the model in the bucket, "
            f"then cdk deploy '{team}/*' -c teams={teams_file}") if team else \
        (f"python -m workloads preflight {workload}, cdk deploy TrainStack -c workload={workload}, upload the data, "
         f"train and put the model in the bucket, then cdk deploy InferenceStack -c workload={workload}")
    console.print(f"\nDeployed {len(reports)} stacks to the emulator in {time.perf_counter() - started:.0f} s; "
                  f"the emulator has been stopped. For a real account: {real}")
    return 0


def _serve(console: Console, emulator, *, workload: str, team: str | None, teams_file: str,
           app_args: list[str]) -> None:
    """Keep the emulator running with the estate deployed, and say how to point the commands at it."""
    names = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION",
             "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_EC2_METADATA_DISABLED", "SAGEMAKER_VALIDATE_ROLE")
    env = emulator.env()
    console.print("\n[bold]The emulator keeps running[/bold] with the estate deployed. In another shell, in this "
                  "folder, paste these lines, then run the job and endpoint commands against it:")
    print("\n".join(f"export {k}={env[k]}" for k in names), flush=True)
    print("\n".join(serve_lines(workload=workload, team=team, teams_file=teams_file, app_args=app_args)), flush=True)
    console.print("Ctrl-C here stops it (everything deployed to it is gone).", soft_wrap=True)
    while True:
        time.sleep(3600)


def serve_lines(*, workload: str, team: str | None, teams_file: str, app_args: list[str]) -> list[str]:
    """The commands the kept emulator offers, each complete as printed: the job and endpoint commands name the
    workload as the user gave it (a team's: its file from here, its overrides and --stage), and the deploy line carries
    what the emulator needs."""
    from .emulator import deploy_command

    target = workload_args(team, teams_file) + f" --stage {team}" if team else workload
    return ["  source .venv/bin/activate",
            f"  python -m workloads invoke {target}",
            f"  python -m workloads submit {target}",
            f"  python -m workloads process {target} --code examples/prep.py",
            f"  {deploy_command(app_args, (f'{team}/*',) if team else ('--all',))}   # after a change: redeploy"]


def workload_args(team: str, teams_file: str) -> str:
    """The workload a team's stage deploys, as the job commands take it (with --stage)."""
    return next(t.workload_args for t in load_teams(teams_file, only=team))


def _one_call(emulator, the_plan, *, stage: str):
    """Send one request the way `python -m workloads invoke` does, to the emulator."""
    if not any(k in the_plan.inference for k in INVOCABLE):
        return None
    kind = default_kind(the_plan)
    content_type, body = sample_request(the_plan, kind)  # what `invoke` sends by default: the container's contract
    with emulator.in_process():
        return invoke(the_plan, kind=kind, body=body, content_type=content_type, stage=stage, timeout_s=30,
                      poll_s=0.5)


def _print_reports(console: Console, reports) -> None:
    table = Table(title="Stack outputs (from the emulator)", title_justify="left")
    for col in ("stack", "status", "output", "value"):
        table.add_column(col)
    for r in reports:
        mine = {k: v for k, v in r.outputs.items() if not k.startswith("ExportsOutput")}  # CDK's cross-stack plumbing
        for key, value in sorted(mine.items()) or [("-", "-")]:
            table.add_row(r.name, r.status, key, value)
    console.print(table)
    skipped = Counter(t for r in reports for t in r.skipped.values())
    created = Counter(t for r in reports for t in r.created.values())
    console.print(f"Created by the emulator: {sum(created.values())} resources of {len(created)} types.")
    if skipped:
        console.print("[bold yellow]Skipped by the emulator[/bold yellow] (moto has no CloudFormation model for "
                      "these, or cannot run the Lambda behind a Custom:: type; they are in the templates and deploy "
                      "on a real account):")
        for rtype, n in sorted(skipped.items()):
            console.print(f"  - {rtype} x{n}")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C: the emulator stopped on the way out; no traceback
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while we say so changes nothing
        print("\ninterrupted: the local emulator has been stopped (nothing was deployed to AWS)", file=sys.stderr)
        die_of_sigint()  # so `make demo` and the shell see an interrupt (130), not an error
