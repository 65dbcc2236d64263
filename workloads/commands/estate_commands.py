"""The commands that act on the deployed estate: `submit` and `process` start a SageMaker job, `promote` copies a
job's model to where the endpoints read it, `invoke` sends one request to an endpoint. Each refuses bad input before
any AWS call (exit 2, cli.main reports it); a missing stack or an AWS refusal is one line and exit 1, never a
traceback."""

from __future__ import annotations

import argparse
import sys

from ..errors import ConfigError, raise_all
from ..planning.planner import Plan


def run_job(args: argparse.Namespace, result: Plan) -> int:
    from . import jobs

    # Bad input is refused before any AWS call, every mistake at once (main reports them: one line each, exit 2).
    jobs.check_sagemaker_jobs(result, command=args.command)
    if args.command == "submit" and args.source_dir is None:
        shipped = jobs.example_script(result)
        if shipped and args.entry_point is None:
            args.source_dir, args.entry_point = shipped
        elif args.entry_point is not None:  # a script of one's own: beside the shipped one, or here
            args.source_dir = shipped[0] if shipped else "."
    errors = _file_errors(args)
    if args.command == "process":
        errors += jobs.processing_prefix_errors(input_prefix=args.input, output_prefix=args.output)
    raise_all(errors)
    return against_aws(lambda: _start_job(args, result), args)


def _file_errors(args: argparse.Namespace) -> list[ConfigError]:
    """What the command uploads exists."""
    from pathlib import Path

    if args.command == "process":
        return [] if Path(args.code).is_file() else [
            ConfigError("--code", args.code, "an existing processing script, e.g. examples/prep.py", reason="no such file")]
    if args.source_dir is None or args.entry_point is None:
        return [ConfigError("--entry-point" if args.entry_point is None else "--source-dir", None,
                            "--entry-point and --source-dir of your training script",
                            reason="no training script is shipped for this workload's framework and format")]
    source = Path(args.source_dir)
    if not source.is_dir():
        return [ConfigError("--source-dir", args.source_dir, "an existing folder holding the training script",
                            reason="no such folder")]
    if not (source / args.entry_point).is_file():
        inside = sorted(p.name for p in source.glob("*.py"))[:5]
        return [ConfigError("--entry-point", args.entry_point, f"a script inside --source-dir {args.source_dir}"
                            + (f" ({', '.join(inside)})" if inside else "") + ", or --source-dir FOLDER holding it",
                            reason=f"no such file in {args.source_dir}")]
    return []


def _start_job(args: argparse.Namespace, result: Plan) -> None:
    from . import jobs

    estate = jobs.read_estate(result, stage=args.stage)
    if args.command == "submit":
        job = jobs.submit(result, entry_point=args.entry_point, source_dir=args.source_dir, estate=estate)
        on = "managed spot" if job.spot else \
            "on a training plan" if result.workload.training.training_plan_arn else "on-demand"
        print(f"training job {job.job_name}: {job.instance_count} x {job.instance_type}, input {job.input}, {on}; "
              f"estimated cost {job.estimate}")
        if job.prepare_job:
            from .prepare_job import INSTANCE_TYPE, tokens_prefix

            done = "shards already complete" if job.prepare_job == "already prepared" else \
                f"prepare job {job.prepare_job} (1 x {INSTANCE_TYPE}) tokenized the dataset once"
            print(f"{done}: s3://{estate.bucket}/{tokens_prefix(result)} -> the job's tokens channel", flush=True)
        from ..config.loader import command_args

        stage = f" --stage {args.stage}" if args.stage else ""
        print(f"when it has finished: python -m workloads promote {command_args(args.workload, args.overrides)}{stage} "
              f"--job {job.job_name}", flush=True)
        if getattr(args, "wait", False):
            import boto3

            from .waiting import wait_for_job

            client = boto3.session.Session().client("sagemaker", region_name=result.workload.region)
            if wait_for_job(client, job.job_name, say=lambda line: print(line, flush=True)) != "Completed":
                raise JobDidNotComplete(job.job_name)
    else:
        name = jobs.process(result, code=args.code, input_prefix=args.input, output_prefix=args.output,
                            instance_type=args.instance_type, instance_count=args.instance_count, estate=estate)
        print(f"processing job {name}: {args.instance_count} x {args.instance_type}, "
              f"s3://{estate.bucket}/{args.input} sharded by S3 key -> s3://{estate.bucket}/{args.output}")


def promote(args: argparse.Namespace, result: Plan) -> int:
    from . import jobs

    def copy() -> None:
        for line in jobs.promote(result, job_name=args.job, estate=jobs.read_estate(result, stage=args.stage)):
            print(f"copied {line}")
    return against_aws(copy, args)


def invoke_endpoint(args: argparse.Namespace, result: Plan) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from .invoke import INVOCABLE, invoke, sample_request
    from .jobs import EstateNotDeployed

    # A kind the plan lacks is bad input (exit 2), refused before any AWS call.
    kinds = [k for k in INVOCABLE if k in result.inference]
    if args.kind not in (None, *kinds) or not kinds:
        raise ConfigError("--kind" if kinds else "workload", args.kind if kinds else args.workload,
                          ", ".join(kinds) if kinds else "a workload with a real-time, serverless or async endpoint",
                          reason=f"the plan has no {args.kind or 'real-time, serverless or async'} endpoint "
                          f"(it has: {', '.join(result.inference) or 'none'})")
    kind = args.kind or kinds[0]
    try:
        sample_type, sample = sample_request(result, kind)
        body = open(args.body, "rb").read() if args.body else (args.data.encode() if args.data else sample)
    except OSError as exc:
        raise ConfigError("--body", args.body, "a readable file", reason=type(exc).__name__) from None
    except EstateNotDeployed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        answer = invoke(result, kind=kind, body=body, content_type=args.content_type or sample_type,
                        stage=args.stage, timeout_s=args.timeout)
    except (EstateNotDeployed, TimeoutError, RuntimeError) as exc:
        print(not_deployed(exc, args), file=sys.stderr)
        return 1
    except (BotoCoreError, ClientError) as exc:
        print(f"error: {aws_failure(exc)}", file=sys.stderr)
        return 1
    where = f" (from {answer.location})" if answer.location else ""
    print(f"{answer.kind} endpoint {answer.endpoint}{where}:")
    print(answer.body.decode(errors="replace"))
    return 0


class JobDidNotComplete(Exception):
    """`submit --wait`: the job ended Failed or Stopped (its lines say why)."""


def against_aws(call, args: argparse.Namespace | None = None) -> int:
    """Run a command's AWS calls: a missing stack or an AWS refusal is one line and exit 1, never a traceback."""
    from botocore.exceptions import BotoCoreError, ClientError

    from .jobs import EstateNotDeployed

    try:
        call()
    except EstateNotDeployed as exc:
        print(not_deployed(exc, args) if args is not None else f"error: {exc}", file=sys.stderr)
        return 1
    except (BotoCoreError, ClientError) as exc:
        print(f"error: {aws_failure(exc)}", file=sys.stderr)
        return 1
    except JobDidNotComplete as exc:
        print(f"error: training job {exc} did not complete (see the lines above)", file=sys.stderr)
        return 1
    return 0


def not_deployed(exc: Exception, args: argparse.Namespace) -> str:
    """The error line for a missing stack, with the `cdk deploy` that brings it up for this very workload: the file
    or preset and the -c options as typed (a team's stacks are its stage's)."""
    stack = getattr(exc, "deploy", None)
    if stack is None:
        return f"error: {exc}"
    options = " ".join(f"-c {k}={v}" for k, v in getattr(args, "overrides", {}).items()
                       if k not in ("teams", "team"))
    if getattr(args, "stage", ""):
        command = f"cdk deploy '{args.stage}/{stack}' -c teams=TEAMS_FILE"
    else:
        command = f"cdk deploy {stack} -c workload={args.workload}" + (f" {options}" if options else "")
    return f"error: {exc}; run: {command}"


def aws_failure(exc: Exception) -> str:
    """What went wrong with an AWS call, and what to do: no credentials means nothing was sent."""
    from botocore.exceptions import EndpointConnectionError, NoCredentialsError, NoRegionError

    if isinstance(exc, NoCredentialsError):
        return ("no AWS credentials were found, so nothing was sent. For a real account, configure credentials "
                "(aws configure, AWS_PROFILE); to try it locally, run `make emulator` and paste the lines it prints")
    if isinstance(exc, EndpointConnectionError):
        return f"could not reach AWS ({exc}); check the network, or AWS_ENDPOINT_URL if you set it for the emulator"
    if isinstance(exc, NoRegionError):
        return "no AWS region is set; the plan's region is used for every call: report this as a bug"
    return f"AWS refused the request: {exc}"
