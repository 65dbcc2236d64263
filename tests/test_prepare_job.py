"""Issue 42: tokenization happens once before a SageMaker training job. Before: every node of the job tokenized the
whole dataset before step 1 (train.py --text), outside the plan's hours. Now `submit` starts one Processing job
(prepare.py on one CPU instance, network-isolated, in the training image's CPU build) that writes the shards under
processed/tokens/<workload>/, waits for it, and the training job reads them as its `tokens` channel; complete shards
are not prepared twice. Run against moto in this process (the requests as sent are recorded)."""

from __future__ import annotations

import contextlib
import io
import os

import pytest

from workloads import load, plan
from workloads.commands import jobs, prepare_job
from workloads.planning import layout

from .conftest import ROOT, sdk_waits_without_sleeping

BUCKET = "estate-datasets"


@pytest.fixture
def aws(monkeypatch):
    import boto3
    import botocore.client
    from moto import mock_aws

    for k, v in dict(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-west-2",
                     AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
                     SAGEMAKER_VALIDATE_ROLE="false").items():  # moto has no IAM policy simulation
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    sent: dict[str, list[dict]] = {}
    call = botocore.client.BaseClient._make_api_call

    def recording(client, operation, params):
        sent.setdefault(operation, []).append(params)
        return call(client, operation, params)

    with mock_aws(), sdk_waits_without_sleeping():
        monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recording)
        s3 = boto3.client("s3", region_name="us-west-2")
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        role = boto3.client("iam").create_role(RoleName="train", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        estate = jobs.Estate(region="us-west-2", role_arn=role, bucket=BUCKET, subnets=("subnet-1",),
                             security_groups=("sg-1",))
        yield estate, s3, sent


def _submit(estate, p):
    from workloads.commands.estate_commands import _start_job
    from types import SimpleNamespace

    out = io.StringIO()
    args = SimpleNamespace(command="submit", workload="intermediate", overrides={}, stage="", wait=False,
                           entry_point="train.py", source_dir=str(ROOT / "examples" / "slurm"))
    with contextlib.redirect_stdout(out):
        original, jobs.read_estate = jobs.read_estate, lambda *_, **__: estate
        try:
            _start_job(args, p)
        finally:
            jobs.read_estate = original
    return out.getvalue()


def test_the_tests_wait_for_a_finished_job_without_sleeping(aws, monkeypatch):
    """moto ends a Processing job as it starts it: the SDK's wait for it (sleep 10 s, then look) looks at once in the
    tests (conftest.sdk_waits_without_sleeping), which slept 120 s of make test's time before."""
    from sagemaker.core import common_utils

    slept: list[float] = []
    monkeypatch.setattr(common_utils.time, "sleep", slept.append)
    estate, _, sent = aws
    _submit(estate, plan(load("intermediate")))
    assert sent["CreateProcessingJob"] and slept == [0], slept


def test_submit_tokenizes_once_in_a_processing_job_and_the_job_reads_its_shards(aws):
    estate, s3, sent = aws
    p = plan(load("intermediate"))
    printed = _submit(estate, p)
    [created] = sent["CreateProcessingJob"]
    name = created["ProcessingJobName"]
    assert f"prepare job {name} (1 x ml.c5.9xlarge) tokenized the dataset once: s3://{BUCKET}/processed/tokens/" \
           f"intermediate/ -> the job's tokens channel" in printed
    cluster = created["ProcessingResources"]["ClusterConfig"]
    assert (cluster["InstanceCount"], cluster["InstanceType"]) == (1, prepare_job.INSTANCE_TYPE)
    assert created["NetworkConfig"]["EnableNetworkIsolation"] and created["NetworkConfig"]["VpcConfig"]["Subnets"]
    image = created["AppSpecification"]["ImageUri"]
    assert "/pytorch-training:" in image and "-cpu-" in image  # the trainer's Python and tokenizers, CPU build
    assert created["AppSpecification"]["ContainerArguments"] == prepare_job.arguments(p)
    [out] = created["ProcessingOutputConfig"]["Outputs"]
    assert out["S3Output"]["S3Uri"] == f"s3://{BUCKET}/processed/tokens/intermediate/"
    assert out["S3Output"]["LocalPath"] == prepare_job.OUTPUT and out["S3Output"]["S3UploadMode"] == "EndOfJob"
    data = next(i for i in created["ProcessingInputs"] if i["InputName"] == "datasets")["S3Input"]
    assert data["S3Uri"] == f"s3://{BUCKET}/{layout.DATASETS}" and data["LocalPath"] == prepare_job.INPUT
    # The code: prepare.py and the modules beside it (classify_data.py for a classifier), from examples/slurm.
    [job] = sent["CreateTrainingJob"]
    tokens = next(c for c in job["InputDataConfig"] if c["ChannelName"] == "tokens")
    assert tokens["DataSource"]["S3DataSource"]["S3Uri"] == out["S3Output"]["S3Uri"]
    assert job["HyperParameters"]["data"] == layout.JOB_TOKENS_CHANNEL == "/opt/ml/input/data/tokens"
    assert "text" not in job["HyperParameters"]
    assert sent["DescribeProcessingJob"]  # submit waited for the prepare job's end before creating the training job

    # A finished prepare job left its shards: a second submit starts no second one.
    for key in ("meta.json", "done-0-of-1", "part.txt.bin"):
        s3.put_object(Bucket=BUCKET, Key=prepare_job.tokens_prefix(p) + key, Body=b"x")
    printed = _submit(estate, p)
    assert len(sent["CreateProcessingJob"]) == 1 and len(sent["CreateTrainingJob"]) == 2
    assert "shards already complete: s3://" in printed


def test_the_prepare_jobs_arguments_read_the_inputs_where_the_processing_job_puts_them():
    """The container's view: datasets/ mounted at prepare_job.INPUT, so its text and tokenizer are below it; a
    classifier's prepare step writes labelled examples of the plan's sequence."""
    from .test_encoder_training import _classifier

    args = prepare_job.arguments(plan(load("intermediate")))
    assert args[:4] == ["--input", prepare_job.INPUT + "/text", "--tokenizer", prepare_job.INPUT + "/tokenizer"]
    assert "--task" not in args
    classifier = prepare_job.arguments(_classifier(**{"training.orchestrator": "sagemaker-jobs"}))
    assert classifier[-4:] == ["--task", "sequence-classification", "--seq", "128"]


def test_the_job_does_not_tokenize_and_a_classic_job_prepares_nothing(aws):
    estate, _, sent = aws
    from workloads.planning.train_commands import job_hyperparameters

    assert "text" not in job_hyperparameters(plan(load("intermediate")).training.parallelism)
    small = plan(load("small"))
    if small.training.orchestrator == "sagemaker-jobs" and jobs.example_script(small):
        source, entry = jobs.example_script(small)
        jobs.submit(small, entry_point=entry, source_dir=source, estate=estate)
        assert "CreateProcessingJob" not in sent  # XGBoost / scikit-learn read their data themselves


def test_a_failed_prepare_job_starts_no_training_job_and_says_why(aws, monkeypatch):
    estate, _, sent = aws
    monkeypatch.setattr(prepare_job, "run", lambda *a, **k: ("w-prepare-1", "Failed", "AlgorithmError: exit 1"))
    p = plan(load("intermediate"))
    with pytest.raises(jobs.EstateNotDeployed, match="prepare job w-prepare-1 ended Failed: AlgorithmError: exit 1; "
                                                     "the training job was not started"):
        jobs.submit(p, entry_point="train.py", source_dir=str(ROOT / "examples" / "slurm"), estate=estate)
    assert "CreateTrainingJob" not in sent
