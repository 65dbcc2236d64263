"""The requests `python -m workloads submit|process` send, against the role they name: every option of the
CreateTrainingJob and CreateProcessingJob requests has a row in tests/sources/role_calls.yaml, and the
TrainStack's role (synthesized, in the same world as the templates) can make every call SageMaker makes
with it for those options.

The jobs run against moto in process; the estate comes from the synthesized stacks' outputs, resolved
in the world (jobs.read_estate with a CloudFormation stand-in), so the request names the world's role,
bucket, subnet and key. The requests are captured as botocore sends them."""

from __future__ import annotations

import pytest

from workloads import load, plan
from workloads.commands import jobs
from workloads.planning import layout

from .conftest import ROOT, sdk_waits_without_sleeping
from .contract_calls import Walk, walk_request
from .test_runtime_contract import refused, world_of

SOURCE = ROOT / "examples" / "slurm"
WORKLOADS = ("intermediate", "small")  # the presets that train with SageMaker jobs


class Outputs:
    """CloudFormation DescribeStacks answered from the synthesized templates' Outputs, resolved in the world."""

    def __init__(self, world) -> None:
        self.world = world

    def describe_stacks(self, StackName: str) -> dict:
        stack = self.world.stacks[StackName.split("-", 1)[1]]
        outputs = [{"OutputKey": k, "OutputValue": str(self.world.resolve(stack.name, v["Value"]))}
                   for k, v in stack.template.get("Outputs", {}).items()]
        return {"Stacks": [{"Outputs": outputs}]}


@pytest.fixture(scope="module")
def sent(synth):
    """(workload, world, operation, request) for every job request the two commands send."""
    import boto3
    import botocore.client
    from moto import mock_aws

    out = []
    mp = pytest.MonkeyPatch()
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
        mp.delenv(name, raising=False)
    mp.setenv("AWS_ACCESS_KEY_ID", "testing")
    mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    mp.setenv("SAGEMAKER_VALIDATE_ROLE", "false")  # the SDK's own IAM simulation: moto has none; we evaluate here
    call = botocore.client.BaseClient._make_api_call
    captured: list[tuple[str, dict]] = []

    def recording(client, operation, params):
        if operation in ("CreateTrainingJob", "CreateProcessingJob"):
            captured.append((operation, params))
        return call(client, operation, params)

    mp.setattr(botocore.client.BaseClient, "_make_api_call", recording)
    try:
        with sdk_waits_without_sleeping():
            for workload in WORKLOADS:
                p = plan(load(workload))
                world = world_of(synth(workload))
                with mock_aws():
                    estate = jobs.read_estate(p, cloudformation=Outputs(world))
                    where = {} if estate.region == "us-east-1" else \
                        {"CreateBucketConfiguration": {"LocationConstraint": estate.region}}
                    boto3.client("s3", region_name=estate.region).create_bucket(Bucket=estate.bucket, **where)
                    captured.clear()
                    jobs.submit(p, entry_point="train.py", source_dir=str(SOURCE), estate=estate)
                    jobs.process(p, code=str(SOURCE / "train.py"), input_prefix=layout.DATASETS,
                                 output_prefix=layout.PROCESSED, instance_type="ml.m5.xlarge", instance_count=2,
                                 estate=estate)
                    out += [(workload, world, op, params) for op, params in captured]
    finally:
        mp.undo()
    assert {(w, op) for w, _, op, _ in out} == {(w, op) for w in WORKLOADS
                                                for op in ("CreateTrainingJob", "CreateProcessingJob")}
    return out


@pytest.fixture(scope="module")
def request_walks(sent):
    return [(workload, world, op, walk_request(world, world.stacks["TrainStack"], f"sagemaker:{op}", params))
            for workload, world, op, params in sent]


def test_every_request_option_has_a_row(request_walks):
    out = Walk()
    for _, _, _, w in request_walks:
        out.extend(w)
    assert not out.uncovered, "\n".join(sorted(set(out.uncovered)))
    assert not out.problems, "\n".join(out.problems)


def test_the_training_role_can_do_what_sagemaker_does_for_each_request(request_walks):
    out = []
    for workload, world, op, w in request_walks:
        assert w.found, (workload, op)
        out += [f"{workload} {op}: {m}" for m in refused(w.found, world)]
    assert not out, "\n".join(out)


def test_a_request_names_the_estates_role_and_data(sent):
    """The requests are made in the world the templates describe: its role, its bucket, its key."""
    for workload, world, op, params in sent:
        assert world.lookup(params["RoleArn"]) is not None, (workload, op)
        assert "datastack-datasets" in str(params), (workload, op)
