"""What the SageMaker jobs of `python -m workloads submit|process` do as the training role, evaluated against the
synthesized policies (tests/contract_policy.py): pull each job's image, read and write the prefixes the command
allows (workloads/planning/layout.py), and let EBS use the data key for the jobs' volumes. Expectations come from the
commands' own data (jobs.job_images, layout.PROCESSING_*), so a new image or prefix is checked without a new case."""

from __future__ import annotations

import pytest

from workloads import load, plan
from workloads.commands import jobs
from workloads.planning import layout

from .test_runtime_contract import world_of
from .contract_policy import FAKE_ACCOUNT, PARTITION, Call, evaluate

ROLE = "TrainStack/TrainingRole/Role/Resource"
SAGEMAKER_JOBS = ("intermediate", "small")  # the presets whose plans run SageMaker jobs


def _repository(image_uri: str) -> str:
    """Parsed here, not with sagemaker_access.image_repository_arn: the test must not share the code it checks."""
    registry, _, rest = image_uri.partition("/")
    parts = registry.split(".")
    return f"arn:{PARTITION}:ecr:{parts[3]}:{parts[0]}:repository/{rest.split(':')[0]}"


@pytest.fixture(scope="module", params=SAGEMAKER_JOBS)
def estate(request, synth):
    p = plan(load(request.param))
    assert p.training.orchestrator == "sagemaker-jobs"
    s = synth(request.param)
    world = world_of(s)
    train = world.stacks[next(n for n in world.stacks if n.endswith("TrainStack"))]
    data = world.stacks[next(n for n in world.stacks if n.endswith("DataStack"))]
    bucket = world.arn("DataStack/Datasets/Dataset/Resource", "AWS::S3::Bucket")
    key = world.arn("DataStack/DataKey/Key/Resource", "AWS::KMS::Key")
    return p, s, world, world.role(ROLE), bucket, key, train, data


def test_the_role_pulls_every_image_the_jobs_run(estate):
    """`submit` runs the training image, `process` the scikit-learn one, from another registry account."""
    p, s, world, role, *_ = estate
    images = jobs.job_images(p)
    if p.workload.model.framework == "pytorch":  # the case the role missed: two images in two registry accounts
        assert len({_repository(i).split(":")[4] for i in images}) == 2
    for image in images:
        for action in ("ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"):
            decision = evaluate(role, Call(action, _repository(image), "CreateProcessingJob/CreateTrainingJob"), world)
            assert decision.allowed, (image, action, decision.reason)
    assert evaluate(role, Call("ecr:GetAuthorizationToken", "*", "ECR"), world).allowed
    outputs = s.templates["TrainStack"]["Outputs"]
    assert (outputs["TrainingImage"]["Value"], outputs["ProcessingImage"]["Value"]) == images


def test_the_role_pulls_no_other_image(estate):
    p, _, world, role, *_ = estate
    for image in jobs.job_images(p):
        registry, _, rest = image.partition("/")
        for other in (f"{registry}/some-other-image:1.0", f"999999999999{registry[12:]}/{rest}"):
            assert not evaluate(role, Call("ecr:BatchGetImage", _repository(other), "ECR"), world).allowed, other


def test_processing_reads_and_writes_what_the_command_allows(estate):
    """Every prefix `process` accepts for --input is readable and for --output writable, as the role itself
    (SageMaker reads the inputs and uploads the outputs with the execution role)."""
    _, _, world, role, bucket, key, *_ = estate
    via_s3 = {"kms:ViaService": f"s3.{world.stacks[next(iter(world.stacks))].region}.amazonaws.com",
              "kms:CallerAccount": FAKE_ACCOUNT}
    for prefix in layout.PROCESSING_READS:
        assert evaluate(role, Call("s3:GetObject", f"{bucket}/{prefix}part-0000", "ProcessingInput"), world).allowed
    for prefix in layout.PROCESSING_WRITES:
        assert evaluate(role, Call("s3:PutObject", f"{bucket}/{prefix}job-1/out.csv", "ProcessingOutput"),
                        world).allowed, prefix
    assert evaluate(role, Call("kms:GenerateDataKey", key, "SSE-KMS", via_s3), world).allowed
    # The dataset of record, checkpoints' neighbours and model artifacts stay out of its reach.
    for prefix in (layout.DATASETS, layout.JOBS):
        assert not evaluate(role, Call("s3:PutObject", f"{bucket}/{prefix}x", "no rewrite"), world).allowed, prefix


def test_the_role_may_grant_ebs_the_volume_key(estate):
    """A job with VolumeKmsKeyId (every EBS-only type: jobs.Estate.volume_key) makes EBS create a grant on the key as
    the execution role (SageMaker Developer Guide, "How to use SageMaker AI execution roles"), for AWS resources only."""
    _, _, world, role, _, key, *_ = estate
    for_ebs = {"kms:GrantIsForAWSResource": "true", "kms:CallerAccount": FAKE_ACCOUNT}
    assert evaluate(role, Call("kms:CreateGrant", key, "VolumeKmsKeyId", for_ebs), world).allowed
    for_anyone = {"kms:GrantIsForAWSResource": "false", "kms:CallerAccount": FAKE_ACCOUNT}
    assert not evaluate(role, Call("kms:CreateGrant", key, "a grant to a principal of the role's choosing",
                                   for_anyone), world).allowed
    assert jobs.Estate(region="us-west-2", role_arn="r", bucket="b", subnets=(), security_groups=(),
                       key_arn=key).volume_key("ml.m5.xlarge") == key  # the jobs do pass the key there


@pytest.mark.parametrize("variant", ["huge", "huge-hyperpod"])
def test_nodes_roles_pull_no_job_image_and_write_no_processed_data(synth, variant):
    """Slurm and HyperPod nodes run no SageMaker job: their role gets neither the images nor processed/."""
    from .conftest import VARIANTS

    name, overrides = VARIANTS[variant]
    assert not jobs.job_images(plan(load(name, overrides)))
    world = world_of(synth(name, overrides))
    role = world.role(ROLE)
    bucket = world.arn("DataStack/Datasets/Dataset/Resource", "AWS::S3::Bucket")
    assert not any(st for st in role.identity if "ecr:BatchGetImage" in str(st.get("Action")))
    assert not evaluate(role, Call("s3:PutObject", f"{bucket}/{layout.PROCESSED}x", "none"), world).allowed
