"""`python -m workloads submit|process` against the local emulator: the jobs exist with the planned
parameters (instance, count, distribution, input mode, spot, image per family, VPC)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest

from tools.emulator import running
from workloads import ConfigError, load, plan
from workloads.commands import jobs
from workloads.planning import layout

from .conftest import ROOT, sdk_waits_without_sleeping
from .golden import record_training_jobs

SOURCE = ROOT / "examples" / "slurm"


@pytest.fixture(scope="module")
def emulator(synth):
    s = synth("intermediate")
    with running("us-west-2") as emu:
        emu.bootstrap(quiet=True)
        emu.deploy_estate("--app", str(s.outdir), plan=plan(load("intermediate")), quiet=True)
        with emu.in_process(), sdk_waits_without_sleeping():
            yield emu


def test_preflight_passes_against_the_emulator_its_error_message_recommends(emulator, capsys):
    """Without credentials preflight sends the user to `make emulator`, which this fixture sets up (bootstrap with the
    real CLI, then the estate): the bootstrap stack carries its BootstrapVersion as `cdk bootstrap`'s does, and what
    moto does not serve is a warning that says so, never a denied permission or an HTML page."""
    from workloads.commands.cli import main

    status = main(["preflight", "intermediate"])
    lines = capsys.readouterr().err.splitlines()
    assert status == 0, lines
    # a service moto lacks answers HTTP 500: said as a failure of the service, never as the value of a quota
    assert all(line.startswith("warning: ") and "local emulator answers so" in line for line in lines), lines
    assert not any(" = 500:" in line for line in lines), lines
    boot = emulator.client("cloudformation").describe_stacks(StackName="CDKToolkit")["Stacks"][0]
    assert {o["OutputKey"]: o["OutputValue"] for o in boot["Outputs"]}["BootstrapVersion"].isdigit()


def _job(emu, name: str) -> dict:
    return emu.client("sagemaker").describe_training_job(TrainingJobName=name)


def _submit(overrides=None):
    p = plan(load("intermediate", overrides))
    return p, jobs.submit(p, entry_point="train.py", source_dir=str(SOURCE), estate=jobs.read_estate(p))


def test_estate_is_read_from_the_stacks(emulator):
    estate = jobs.read_estate(plan(load("intermediate")))
    assert estate.role_arn.startswith("arn:aws:iam::") and estate.bucket
    assert estate.subnets[0].startswith("subnet-") and estate.security_groups[0].startswith("sg-")


def test_submit_runs_the_planned_job(emulator):
    p, submitted = _submit()
    job = _job(emulator, submitted.job_name)
    t = p.training
    # the preset's pick: p4d since the plan compares llm-foundry's rows at its own 4,096 tokens (A100 reaches more of
    # its peak there than H100); both have local NVMe
    assert job["ResourceConfig"]["InstanceType"] == t.sagemaker_instance_type
    assert job["ResourceConfig"]["InstanceCount"] == t.instance_count
    assert job["AlgorithmSpecification"]["TrainingImage"].endswith("pytorch-training:2.10-gpu-py313")
    train = next(c for c in job["InputDataConfig"] if c["ChannelName"] == "train")
    assert train["InputMode"] == "FastFile" and train["DataSource"]["S3DataSource"]["S3Uri"].endswith("/datasets/")
    assert job["VpcConfig"]["Subnets"] and job["VpcConfig"]["SecurityGroupIds"]
    assert job["CheckpointConfig"]["S3Uri"].endswith(f"/checkpoints/{jobs.base_job_name(p, 'train')}/")
    assert not job.get("EnableManagedSpotTraining")
    assert "on-demand" in submitted.estimate
    # What a team's ML users' policy requires of a job (test_team_isolation): isolated, outputs with the data key;
    # p4d has local NVMe, so no volume key.
    assert job["EnableNetworkIsolation"] is True
    key = job["OutputDataConfig"]["KmsKeyId"]
    assert key == jobs.read_estate(p).key_arn and ":key/" in key
    assert not job["ResourceConfig"].get("VolumeKmsKeyId")


def test_the_job_carries_the_plans_layout_and_checkpoint_folder(emulator, monkeypatch):
    """train.py finds the plan's layout and resumes from the folder SageMaker syncs with the checkpoint URI. The
    emulator does not keep a job's Environment, so the CreateTrainingJob request itself is read."""
    sent = record_training_jobs(monkeypatch)
    p, _ = _submit()
    env = sent[-1]["Environment"]
    assert env["CHECKPOINT_DIR"] == jobs.CHECKPOINT_LOCAL_PATH == sent[-1]["CheckpointConfig"].get(
        "LocalPath", jobs.CHECKPOINT_LOCAL_PATH)
    assert json.loads(env[jobs.LAYOUT_ENV]) == json.loads(p.training.parallelism.as_json())


def test_the_training_role_pulls_the_image_submit_runs(synth):
    for workload in ("intermediate", "small"):
        p = plan(load(workload))
        outputs = synth(workload).templates["TrainStack"]["Outputs"]
        if p.training.orchestrator == "sagemaker-jobs":
            assert outputs["TrainingImage"]["Value"] == jobs.training_image(p)


def test_a_teams_job_carries_its_tag():
    estate = jobs.Estate(region="us-west-2", role_arn="r", bucket="b", subnets=("s",), security_groups=("g",),
                         key_arn="arn:aws:kms:us-west-2:123456789012:key/k", team="vision")
    assert estate.tags() == [{"Key": "team", "Value": "vision"}]
    assert estate.volume_key("ml.m5.xlarge") == estate.key_arn and estate.volume_key("ml.g5.xlarge") is None


def test_submit_with_managed_spot(emulator):
    p, submitted = _submit({"training.spot": "true"})
    job = _job(emulator, submitted.job_name)
    assert job["EnableManagedSpotTraining"] is True
    stop = job["StoppingCondition"]
    assert stop["MaxWaitTimeInSeconds"] >= stop["MaxRuntimeInSeconds"] >= p.training.estimate.hours * 3600
    assert "managed spot" in submitted.estimate


def test_submit_multi_instance_uses_torchrun(emulator):
    p, submitted = _submit({"training.instance_count": "2"})
    job = _job(emulator, submitted.job_name)
    assert job["ResourceConfig"]["InstanceCount"] == 2
    drivers = [c for c in job["InputDataConfig"] if c["ChannelName"] == "sm_drivers"]
    assert drivers, "the SDK ships its torchrun driver as a channel"


@pytest.mark.parametrize("itype, image, extra", [
    ("p5.48xlarge", "pytorch-training:2.10-gpu-py313", {}),
    ("p4d.24xlarge", "pytorch-training:2.10-gpu-py313", {}),
    # 3B over g5's 40 Gbps without EFA cannot meet 72 h whatever the node count (the FSDP traffic is exposed): 1B can
    ("g5.12xlarge", "pytorch-training:2.10-gpu-py313", {"model.parameters_billion": "1"}),
])
def test_submit_image_per_family(emulator, itype, image, extra):
    _, submitted = _submit({"training.instance_type": itype, **extra})
    job = _job(emulator, submitted.job_name)
    assert image in job["AlgorithmSpecification"]["TrainingImage"]
    assert job["ResourceConfig"]["InstanceType"] == f"ml.{itype}"


def test_submit_refuses_a_slurm_plan(emulator):
    p = plan(load("huge"))
    with pytest.raises(ConfigError, match="submit runs SageMaker training jobs"):
        jobs.submit(p, entry_point="train.py", source_dir=str(SOURCE), estate=jobs.read_estate(plan(load("intermediate"))))


def test_process_shards_the_input_over_instances(emulator):
    p = plan(load("intermediate"))
    name = jobs.process(p, code=str(SOURCE / "train.py"), input_prefix="datasets/", output_prefix="processed/",
                        instance_type="ml.m5.xlarge", instance_count=4, estate=jobs.read_estate(p))
    job = emulator.client("sagemaker").describe_processing_job(ProcessingJobName=name)
    assert job["ProcessingResources"]["ClusterConfig"]["InstanceCount"] == 4
    s3_input = next(i for i in job["ProcessingInputs"] if i["InputName"] == "input")["S3Input"]
    assert s3_input["S3DataDistributionType"] == "ShardedByS3Key" and s3_input["S3Uri"].endswith("/datasets/")
    assert job["NetworkConfig"]["VpcConfig"]["Subnets"]
    # The image the training role may pull (test_job_role), and an output prefix it may write.
    assert job["AppSpecification"]["ImageUri"] == jobs.processing_image(p.workload.region) == jobs.job_images(p)[1]
    out = next(o for o in job["ProcessingOutputConfig"]["Outputs"] if o["OutputName"] == "output")["S3Output"]
    assert out["S3Uri"].endswith("/" + layout.PROCESSED)


# The command in a fresh interpreter where any AWS call exits 99: bad input must be refused before the first one.
NO_AWS = ("import sys, botocore.client\n"
          "def refuse(client, operation, params):\n"
          "    print('AWS call: ' + operation, file=sys.stderr); raise SystemExit(99)\n"
          "botocore.client.BaseClient._make_api_call = refuse\n"
          "from workloads.commands.cli import main\n"
          "raise SystemExit(main(sys.argv[1:]))\n")


def _without_aws(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_AWS, *argv], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "AWS_DEFAULT_REGION": "us-west-2"})


@pytest.mark.parametrize("flag, value", [
    ("--output", "output/cleaned/"),  # the role may put under output/, but that is the training jobs' model output
    ("--output", "datasets/clean/"),  # the dataset of record is read-only
    ("--output", "processed"),  # no trailing slash: processed-other/ would match the S3 prefix too
    ("--input", "checkpoints/"),
    ("--input", "/datasets/"),
])
def test_process_refuses_a_prefix_the_role_cannot_use(flag, value):
    result = _without_aws("process", "intermediate", "--code", "examples/prep.py", flag, value)
    err = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    allowed = layout.PROCESSING_WRITES if flag == "--output" else layout.PROCESSING_READS
    assert len(err) == 1 and err[0].startswith(f"error: {flag} = {value!r}: the training role cannot "), err
    assert err[0].endswith("allowed: a prefix under " + " or ".join(allowed))


def test_process_refuses_a_plan_without_a_jobs_role():
    result = _without_aws("process", "huge", "--code", "x.py")
    err = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(err) == 1, result.stderr
    assert "training.orchestrator = 'slurm': process runs SageMaker processing jobs" in err[0]


def test_process_defaults_are_what_the_role_allows():
    from workloads.commands.cli import _parser

    args = _parser().parse_args(["process", "intermediate", "--code", "x.py"])
    assert not jobs.processing_prefix_errors(input_prefix=args.input, output_prefix=args.output)
    assert (args.input, args.output) == (layout.DATASETS, layout.PROCESSED)


def test_submit_cli_prints_job_and_cost(emulator, capsys):
    """The command line's submit, in this process (`python -m workloads` itself: tests/test_bad_input.py)."""
    from workloads.commands.cli import main

    status = main(["submit", "intermediate", "--entry-point", "train.py", "--source-dir", str(SOURCE)])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert out.startswith("training job intermediate-train-") and "estimated cost $" in out


def test_missing_stacks_are_reported(emulator):
    result = subprocess.run([sys.executable, "-m", "workloads", "submit", "intermediate", "--stage", "nosuch",
                             "--entry-point", "train.py", "--source-dir", "examples/slurm"], cwd=ROOT, capture_output=True, text=True,
                            env=dict(os.environ))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "stack nosuch-NetworkStack is not deployed in us-west-2; run: cdk deploy 'nosuch/TrainStack'" \
        in result.stderr


def test_a_missing_stack_names_the_deploy_for_this_workload_as_typed():
    """The command the line suggests deploys what the command needs (TrainStack for a job, InferenceStack for an
    endpoint), for the file and -c options the user typed, not the workload's name."""
    from types import SimpleNamespace

    from workloads.commands.estate_commands import not_deployed

    args = SimpleNamespace(workload="examples/churn.yaml", stage="", overrides={"training.max_hours": "4"})
    line = not_deployed(jobs.EstateNotDeployed("stack churn-NetworkStack is not deployed in us-east-1",
                                               deploy="TrainStack"), args)
    assert line.endswith("; run: cdk deploy TrainStack -c workload=examples/churn.yaml -c training.max_hours=4")
    invoked = []
    real = jobs.stack_outputs

    class Missing:
        def describe_stacks(self, **_):
            from botocore.exceptions import ClientError
            raise ClientError({"Error": {"Code": "ValidationError", "Message": "does not exist"}}, "DescribeStacks")

    try:
        real(plan(load("small")), ("DataStack", "InferenceStack"), cloudformation=Missing())
    except jobs.EstateNotDeployed as exc:
        invoked.append(exc.deploy)
    assert invoked == ["InferenceStack"]


def test_fsx_plans_read_through_the_file_system():
    p = plan(load("intermediate", {"data.storage": "fsx-lustre"}))
    estate = jobs.Estate(region="us-west-2", role_arn="arn:aws:iam::1:role/r", bucket="b", subnets=("subnet-1",),
                         security_groups=("sg-1",), fsx_file_system_id="fs-0123", fsx_mount_name="abcdef")
    channel = jobs.input_channel(p, estate)
    fs = channel.data_source.file_system_data_source
    assert (fs.file_system_type, fs.file_system_id, fs.directory_path, fs.file_system_access_mode) == \
        ("FSxLustre", "fs-0123", "/abcdef/datasets", "ro")


def _recorded_submit(monkeypatch, *argv: str) -> tuple[dict, str]:
    """`python -m workloads submit ...` in this process: the CreateTrainingJob request as sent, and what it printed
    (record_training_jobs)."""
    import contextlib
    import io

    from workloads.commands.cli import main

    sent = record_training_jobs(monkeypatch)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["submit", *argv]) == 0
    return sent[-1], out.getvalue()


def test_a_language_model_job_runs_the_shipped_trainer_on_the_plans_data(emulator, monkeypatch):
    """With no script named, `submit` runs examples/slurm/train.py with the channel's text and tokenizer and the
    plan's steps, uploads the model uncompressed (a Hugging Face directory is served from a prefix), and says how it
    becomes the serving key."""
    from workloads.planning.train_commands import job_hyperparameters

    p = plan(load("intermediate"))
    request, printed = _recorded_submit(monkeypatch, "intermediate")
    assert request["HyperParameters"] == {k: str(v) for k, v in
                                          job_hyperparameters(p.training.parallelism, speed=p.training.speed_flags).items()}
    # the precision and compiler the estimate is priced at (issue 42): --compile on NVIDIA GPUs, fp8 where it trains so
    assert request["HyperParameters"]["compile"] == "true" and p.training.compiled
    assert request["HyperParameters"]["steps"] == str(p.training.parallelism.steps)
    assert "text" not in request["HyperParameters"]  # tokenized once before the job (issue 42), never on its nodes
    assert request["HyperParameters"]["data"] == layout.JOB_TOKENS_CHANNEL
    assert request["OutputDataConfig"]["CompressionType"] == "NONE"
    assert json.loads(request["Environment"][jobs.LAYOUT_ENV])["export_dir"] == ""  # the trainer uses SM_MODEL_DIR
    assert "python -m workloads promote intermediate --job intermediate-train-" in printed


def keys_in_job(prefix: str) -> str:
    return "/opt/ml/input/data/train/" + prefix.removeprefix(layout.DATASETS).rstrip("/")


def test_a_classic_job_runs_the_frameworks_example_on_a_volume_that_holds_its_data(emulator, monkeypatch):
    """small trains XGBoost in S3 File mode: the channel is copied onto the training volume first, so the volume
    holds the dataset beside SageMaker's 30 GB; the script is the shipped XGBoost one, its model a tar.gz."""
    small = plan(load("small"))
    assert small.training.storage == "s3-file"
    p_dir, entry = jobs.example_script(small)
    assert (ROOT / "examples" / "classic" / entry).is_file() and entry == "xgboost_train.py"
    submitted = jobs.submit(small, entry_point=entry, source_dir=p_dir, estate=jobs.read_estate(plan(load("intermediate"))))
    job = _job(emulator, submitted.job_name)
    volume = job["ResourceConfig"]["VolumeSizeInGB"]
    assert volume == jobs.volume_gb(small, llm_trainer=False)
    assert volume >= jobs.DEFAULT_VOLUME_GB + small.workload.data.dataset_size_gib * 2**30 / 1e9
    assert job["OutputDataConfig"].get("CompressionType", "GZIP") == "GZIP"


def test_promote_copies_a_jobs_model_to_the_keys_serving_reads(emulator):
    """An uncompressed Hugging Face directory goes to each prefix a GPU container reads (the Neuron export's prefix
    is not a training output); a model.tar.gz to the archive key."""
    p = plan(load("intermediate"))
    estate = jobs.read_estate(p)
    s3, sm = emulator.client("s3"), emulator.client("sagemaker")
    name = "intermediate-train-promote"
    base = dict(RoleArn=estate.role_arn, StoppingCondition={"MaxRuntimeInSeconds": 3600},
                AlgorithmSpecification={"TrainingImage": jobs.training_image(p), "TrainingInputMode": "File"},
                ResourceConfig={"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30})
    sm.create_training_job(TrainingJobName=name, OutputDataConfig={
        "S3OutputPath": f"s3://{estate.bucket}/{layout.OUTPUT}", "CompressionType": "NONE"}, **base)
    for f in ("config.json", "model.safetensors", "tokenizer.json"):
        s3.put_object(Bucket=estate.bucket, Key=f"{layout.OUTPUT}{name}/output/model/{f}", Body=b"x")

    def neuron_export() -> dict[str, str]:  # the deploy's placeholders may be there; promote must not touch them
        listed = s3.list_objects_v2(Bucket=estate.bucket, Prefix="models/llm-neuron/").get("Contents", [])
        return {o["Key"]: o["ETag"] for o in listed}
    before = neuron_export()
    copied = jobs.promote(p, job_name=name, estate=estate)
    assert copied == [f"s3://{estate.bucket}/{layout.OUTPUT}{name}/output/model/ -> s3://{estate.bucket}/models/llm/ "
                      "(3 object(s))"]
    listed = {o["Key"] for o in s3.list_objects_v2(Bucket=estate.bucket, Prefix="models/")["Contents"]}
    assert {"models/llm/config.json", "models/llm/model.safetensors", "models/llm/tokenizer.json"} <= listed
    assert neuron_export() == before

    small = plan(load("small"))
    sm.create_training_job(TrainingJobName="small-train-promote", OutputDataConfig={
        "S3OutputPath": f"s3://{estate.bucket}/{layout.OUTPUT}"}, **base)
    s3.put_object(Bucket=estate.bucket, Key=f"{layout.OUTPUT}small-train-promote/output/model.tar.gz", Body=b"tgz")
    assert jobs.promote(small, job_name="small-train-promote", estate=estate) == [
        f"s3://{estate.bucket}/{layout.OUTPUT}small-train-promote/output/model.tar.gz -> "
        f"s3://{estate.bucket}/models/model.tar.gz (1 object(s))"]
    assert s3.get_object(Bucket=estate.bucket, Key="models/model.tar.gz")["Body"].read() == b"tgz"


def test_promote_refuses_a_job_that_has_not_completed_and_says_why():
    """SageMaker uploads the model when the job completes: an unfinished or failed job is one line with its status
    (and the failure reason), not an S3 NoSuchKey."""
    p = plan(load("intermediate"))
    estate = jobs.Estate(region="us-west-2", role_arn="arn:aws:iam::1:role/r", bucket="b", subnets=("subnet-1",),
                         security_groups=("sg-1",))

    class Job:
        def __init__(self, **described):
            self.described = described

        def describe_training_job(self, TrainingJobName):
            return {"TrainingJobName": TrainingJobName, "OutputDataConfig": {"S3OutputPath": "s3://b/output/"},
                    **self.described}

    for described, expected in (
            ({"TrainingJobStatus": "InProgress"}, "job j is InProgress; promote copies the model of a Completed job "
                                                 "(run promote again when it has finished)"),
            ({"TrainingJobStatus": "Failed", "FailureReason": "AlgorithmError: out of memory"},
             "job j is Failed: AlgorithmError: out of memory; promote copies the model of a Completed job")):
        with pytest.raises(jobs.EstateNotDeployed) as refused:
            jobs.promote(p, job_name="j", estate=estate, sagemaker=Job(**described), s3=object())
        assert str(refused.value) == expected


def test_promote_names_the_model_key_a_completed_job_did_not_write():
    """Against the emulator the new user got S3's 'NoSuchKey ... The specified key does not exist.' without the key."""
    from botocore.exceptions import ClientError

    p = plan(load("small"))
    estate = jobs.Estate(region="us-west-2", role_arn="arn:aws:iam::1:role/r", bucket="b", subnets=("subnet-1",),
                         security_groups=("sg-1",))

    class Job:
        def describe_training_job(self, TrainingJobName):
            return {"TrainingJobName": TrainingJobName, "TrainingJobStatus": "Completed",
                    "OutputDataConfig": {"S3OutputPath": "s3://b/output/"}}

    class Bucket:
        def copy_object(self, **_):
            raise ClientError({"Error": {"Code": "NoSuchKey", "Message": "The specified key does not exist."}},
                              "CopyObject")

    with pytest.raises(jobs.EstateNotDeployed) as refused:
        jobs.promote(p, job_name="j", estate=estate, sagemaker=Job(), s3=Bucket())
    assert str(refused.value).startswith("job j is Completed but its model s3://b/output/j/output/model.tar.gz is not "
                                         "there: the job wrote none")


def test_promote_on_the_emulator_says_the_emulator_ran_no_container_and_does_not_blame_the_script(emulator):
    """moto marks a job Completed without running it, so no model is written: the new user was told their training
    script saved none. The module's emulator (a second one inside it would restore the environment under it), with a
    bucket and a job of its own."""
    p = plan(load("small"))
    with contextlib.nullcontext(emulator) as emu:
        s3, sm = emu.client("s3"), emu.client("sagemaker")
        s3.create_bucket(Bucket="promote-data", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        estate = jobs.Estate(region="us-west-2", role_arn="arn:aws:iam::123456789012:role/r", bucket="promote-data",
                             subnets=("subnet-1",), security_groups=("sg-1",))
        sm.create_training_job(
            TrainingJobName="small-train-nothing", RoleArn=estate.role_arn,
            StoppingCondition={"MaxRuntimeInSeconds": 3600},
            AlgorithmSpecification={"TrainingImage": jobs.training_image(p), "TrainingInputMode": "File"},
            ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
            OutputDataConfig={"S3OutputPath": f"s3://promote-data/{layout.OUTPUT}"})
        with pytest.raises(jobs.EstateNotDeployed) as refused:
            jobs.promote(p, job_name="small-train-nothing", estate=estate, sagemaker=sm, s3=s3)
    said = str(refused.value)
    assert "on the local emulator at http://" in said and "runs no training container" in said, said
    assert "nothing is wrong with the training script" in said and "SM_MODEL_DIR" not in said


def test_the_emulator_deploys_a_component_endpoint_and_says_it_skips_the_component(emulator, synth):
    """moto 5.2 has no InferenceComponent (no model in moto/sagemaker, no CloudFormation type; its
    ListInferenceComponents answers 500): the endpoint, its model-less variant and the outputs deploy, the component
    is reported skipped (tools/emulator.py _patch_moto), never faked."""
    from botocore.exceptions import ClientError

    from tools.emulator import deployed_resources
    from workloads.commands.invoke import COMPONENT_KEY

    # The module's estate (intermediate, deployed once by the `emulator` fixture): its real-time LLM has components.
    s, p = synth("intermediate"), plan(load("intermediate"))
    report = {r.name: r for r in deployed_resources(emulator, s.outdir)}["InferenceStack"]
    sm = emulator.client("sagemaker")
    variants = [sm.describe_endpoint_config(EndpointConfigName=c["EndpointConfigName"])["ProductionVariants"][0]
                for c in sm.list_endpoint_configs()["EndpointConfigs"]]
    with pytest.raises(ClientError):
        sm.list_inference_components()
    assert report.status == "CREATE_COMPLETE"
    assert "AWS::SageMaker::InferenceComponent" in set(report.skipped.values())
    assert "AWS::SageMaker::InferenceComponent" not in set(report.created.values())
    assert any("ModelName" not in v and v["InstanceType"] == p.inference["realtime"].instance_type for v in variants)
    assert report.outputs[COMPONENT_KEY]

