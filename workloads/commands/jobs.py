"""SageMaker training and processing jobs from the plan (`python -m workloads submit|process`).

The jobs run in what the stacks deployed: the TrainStack's role, the private subnet and the
cluster security group from NetworkStack, the dataset bucket (and FSx) from DataStack. They
use the caller's AWS credentials like any AWS tool. boto3 and the sagemaker SDK are imported
inside the functions: the planner's import path never loads them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, raise_all
from ..planning import layout
from ..planning.contracts import CONTAINERS
from ..planning.planner import Plan
from . import image_cache
from .emulator_target import is_local
from .image_pins import pinned
# The jobs' images are defined with the serving images (images.py), where image_pins reads them too.
from .images import PROCESSING_IMAGE, PUBLISHED_TAGS, TAG_SUFFIX, TRAINING_IMAGES, job_tags, processing_image, \
    training_image

MAX_RUNTIME_S = 28 * 24 * 3600  # SageMaker's limit for a training job
DEFAULT_RUNTIME_S = 24 * 3600
CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"  # CheckpointConfig.LocalPath's default
LAYOUT_ENV = "LAYOUT_JSON"  # the plan's training.parallelism, for train.py on a training job
# The training script `submit` runs when none is named: the shipped one for the workload's framework, relative to the
# project root (source folder, entry point). PyTorch's is the Llama trainer: only for plans that export a Hugging
# Face directory (a language model); other PyTorch and TensorFlow models bring their own script.
EXAMPLE_SCRIPTS = {"huggingface": ("examples/slurm", "train.py"), "xgboost": ("examples/classic", "xgboost_train.py"),
                   "scikit-learn": ("examples/classic", "sklearn_train.py")}
# SageMaker's training volume when VolumeSizeInGB is not set (CreateTrainingJob ResourceConfig; the SDK's Compute
# default). File mode copies the channel onto it before the script starts.
DEFAULT_VOLUME_GB = 30
PROJECT = Path(__file__).resolve().parents[2]  # where examples/ is


class EstateNotDeployed(Exception):
    """The stacks a job runs in are missing; the message says which command deploys them. `deploy`: the stack
    whose `cdk deploy` brings up what is missing (it deploys the stacks it depends on), for the CLI to name with
    the workload and -c options the user typed."""

    def __init__(self, message: str, *, deploy: str | None = None):
        super().__init__(message)
        self.deploy = deploy


@dataclass(frozen=True)
class Estate:
    """What a deployed estate's stacks export that a job needs: region, role, bucket, network and file systems."""
    region: str
    role_arn: str
    bucket: str
    subnets: tuple[str, ...]
    security_groups: tuple[str, ...]
    fsx_file_system_id: str | None = None
    fsx_mount_name: str | None = None
    home_file_system_id: str | None = None
    key_arn: str | None = None  # the data key: job outputs, and volumes where the instance type takes a key
    team: str = ""  # a team's jobs carry its tag: its ML users' policy requires it (constructs_lib/team_ml_users.py)

    def tags(self) -> list[dict[str, str]]:
        return [{"Key": "team", "Value": self.team}] if self.team else []

    def volume_key(self, instance_type: str) -> str | None:
        """None on instance types with local NVMe: SageMaker refuses a volume key there."""
        from ..catalog import load_catalog

        itype = load_catalog().get(instance_type.removeprefix("ml."))
        return None if itype is not None and itype.local_nvme else self.key_arn


def stack_name(workload: str, stack: str, *, stage: str = "") -> str:
    """The CloudFormation name: a team's stage prefixes it, a lone workload's name does (stacks.estate)."""
    return f"{stage or workload}-{stack}"


def stack_outputs(plan: Plan, stacks: tuple[str, ...], *, stage: str = "", cloudformation=None) -> dict[str, str]:
    """The outputs of deployed stacks, read with CloudFormation DescribeStacks."""
    import boto3
    from botocore.exceptions import ClientError

    region = plan.workload.region
    cf = cloudformation or boto3.client("cloudformation", region_name=region)
    outputs: dict[str, str] = {}
    for stack in stacks:
        name = stack_name(plan.workload.name, stack, stage=stage)
        try:
            described = cf.describe_stacks(StackName=name)["Stacks"][0]
        except ClientError:
            # The last stack the command reads deploys the others with it (TrainStack: network and data first).
            raise EstateNotDeployed(f"stack {name} is not deployed in {region}", deploy=stacks[-1]) from None
        outputs.update({o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])})
    return outputs


def read_estate(plan: Plan, *, stage: str = "", cloudformation=None) -> Estate:
    """What a job runs in: the Network, Data and Train stacks' outputs."""
    outputs = stack_outputs(plan, ("NetworkStack", "DataStack", "TrainStack"), stage=stage,
                            cloudformation=cloudformation)
    mount = outputs.get("FsxMount", "")
    return Estate(
        region=plan.workload.region, role_arn=outputs["TrainingRoleArn"], bucket=outputs["DatasetBucketName"],
        subnets=(outputs["PrivateSubnetId"],), security_groups=(outputs["ClusterSecurityGroupId"],),
        fsx_file_system_id=outputs.get("FsxFileSystemId"), fsx_mount_name=mount.rsplit(":/", 1)[-1] or None,
        home_file_system_id=outputs.get("SharedHomeFileSystemId"), key_arn=outputs.get("DataKeyArn"), team=stage,
    )


def job_images(plan: Plan) -> tuple[str, ...]:
    """Every image a SageMaker job of this plan runs (`submit`, then `process`): what the training role may pull, no
    more. None for plans whose role no SageMaker job runs as (Slurm nodes, HyperPod nodes). By digest where one is
    recorded (catalog/image_digests.yaml, image_pins.py), else by tag."""
    return tuple(pinned(uri)[0] for uri in job_tags(plan))


def check_sagemaker_jobs(plan: Plan, *, command: str) -> None:
    """Only a sagemaker-jobs plan has a role SageMaker jobs run as (TrainStack's TrainingRole for SageMaker)."""
    t = plan.training
    kind = "training" if command == "submit" else "processing"
    if t.orchestrator != "sagemaker-jobs":
        raise ConfigError("training.orchestrator", t.orchestrator, "sagemaker-jobs (for slurm: sbatch on the "
                          "cluster; for hyperpod: the HyperPod cluster)", reason=f"{command} runs SageMaker {kind} jobs")


def processing_prefix_errors(*, input_prefix: str, output_prefix: str) -> list[ConfigError]:
    """A prefix the training role cannot read (--input) or write (--output): the job would start and fail at its
    first object (layout.PROCESSING_READS / PROCESSING_WRITES, the role's grants). Checked before any AWS call."""
    return [ConfigError(flag, value, "a prefix under " + " or ".join(allowed), reason=f"the training role cannot {verb} there")
            for flag, value, allowed, verb in (("--input", input_prefix, layout.PROCESSING_READS, "read"),
                                               ("--output", output_prefix, layout.PROCESSING_WRITES, "write"))
            if not any(value.startswith(prefix) for prefix in allowed)]


def input_channel(plan: Plan, estate: Estate):
    """The `train` channel: S3 File or FastFile, or the FSx for Lustre / EFS file system, as planned."""
    from sagemaker.core.shapes import Channel, DataSource, FileSystemDataSource, S3DataSource

    storage = plan.training.storage
    if storage in ("s3-file", "s3-fastfile"):
        source = DataSource(s3_data_source=S3DataSource(
            s3_data_type="S3Prefix", s3_uri=f"s3://{estate.bucket}/{layout.DATASETS}",
            s3_data_distribution_type="FullyReplicated"))
        return Channel(channel_name="train", data_source=source,
                       input_mode="File" if storage == "s3-file" else "FastFile")
    if storage == "fsx-lustre":
        if not estate.fsx_file_system_id or not estate.fsx_mount_name:
            raise EstateNotDeployed("the plan reads from FSx for Lustre but DataStack has none; redeploy DataStack")
        fs = FileSystemDataSource(file_system_id=estate.fsx_file_system_id, file_system_type="FSxLustre",
                                  file_system_access_mode="ro", directory_path=f"/{estate.fsx_mount_name}/{layout.DATASETS.rstrip('/')}")
    else:
        if not estate.home_file_system_id:
            raise EstateNotDeployed("the plan reads from EFS but DataStack has none; redeploy DataStack")
        fs = FileSystemDataSource(file_system_id=estate.home_file_system_id, file_system_type="EFS",
                                  file_system_access_mode="ro", directory_path="/" + layout.DATASETS.rstrip("/"))
    return Channel(channel_name="train", data_source=DataSource(file_system_data_source=fs), input_mode="File")


@dataclass(frozen=True)
class Submitted:
    """A submitted training job: its name, instances, input and estimate."""
    job_name: str
    instance_type: str
    instance_count: int
    input: str
    spot: bool
    estimate: str
    prepare_job: str = ""  # the Processing job that tokenized the data first ("already prepared": shards were there)


def _runtime_seconds(plan: Plan) -> int:
    hours = plan.training.estimate.hours
    if hours is None:
        return DEFAULT_RUNTIME_S
    return min(MAX_RUNTIME_S, max(3600, math.ceil(hours * 1.5 * 3600)))  # 50% headroom over the estimate


def _session(estate: Estate):
    import boto3
    from sagemaker.core.helper.session_helper import Session

    return Session(boto_session=boto3.Session(region_name=estate.region), default_bucket=estate.bucket,
                   default_bucket_prefix=layout.JOBS.rstrip("/"))


JOB_BASE_NAME_MAX = 40  # the SDK appends a timestamp to the base name


def job_names_start(workload: str, team: str = "") -> str:
    """What every job name `submit` and `process` give starts with: a team's name first, which its ML users' policy
    requires (TEAM-...) and by which its role writes only its own jobs' log streams (constructs_lib/training_role.py)."""
    return re.sub(r"[^a-zA-Z0-9-]", "-", f"{team}-{workload}-" if team else f"{workload}-")[:JOB_BASE_NAME_MAX]


def base_job_name(plan: Plan, kind: str, *, team: str = "") -> str:
    return (job_names_start(plan.workload.name, team) + re.sub(r"[^a-zA-Z0-9-]", "-", kind))[:JOB_BASE_NAME_MAX]


def job_environment(plan: Plan) -> dict[str, str]:
    """What examples/slurm/train.py reads on a training job, as it reads layout.json and CHECKPOINT_DIR on a cluster:
    the plan's layout, and the local folder SageMaker syncs with the checkpoint S3 URI (CheckpointConfig's default
    local path), so a spot interruption or a retried job resumes."""
    # WORKLOAD_NAME: the Workload dimension of the trainer's metrics, which the training dashboard reads
    env = {"CHECKPOINT_DIR": CHECKPOINT_LOCAL_PATH, "WORKLOAD_NAME": plan.workload.name}
    if plan.training.parallelism:
        env[LAYOUT_ENV] = plan.training.parallelism.as_json()
    return env


def example_script(plan: Plan) -> tuple[str, str] | None:
    """The shipped (source folder, entry point) for this workload, or None where the user brings the script."""
    from ..config.model import artifact_format

    from ..planning.train_commands import classifies

    fmt, _ = artifact_format(plan.workload)
    # An encoder classifier trains with the same script (train.py hands its layout to classifier.py).
    llm_trainer = fmt == "huggingface" or classifies(plan.training.parallelism)
    shipped = EXAMPLE_SCRIPTS.get("huggingface" if llm_trainer else plan.workload.model.framework)
    return (str(PROJECT / shipped[0]), shipped[1]) if shipped else None


def is_llm_trainer(plan: Plan, *, source_dir: str, entry_point: str) -> bool:
    """Whether the job runs the shipped Llama trainer, which takes the plan's data, tokenizer and steps."""
    source, entry = EXAMPLE_SCRIPTS["huggingface"]
    return (Path(source_dir) / entry_point).resolve() == (PROJECT / source / entry).resolve()


def volume_gb(plan: Plan, *, llm_trainer: bool) -> int | None:
    """The training volume a job needs, or None on types with local NVMe (SageMaker trains on the instance store
    there and refuses a volume key). What lands on it: the dataset in File mode (copied before the script starts),
    the trainer's token shards (at most the text's size), the local checkpoints SageMaker syncs (CheckpointConfig's
    LocalPath), and the model; SageMaker's 30 GB default under it."""
    from ..catalog import load_catalog
    from ..planning.storage import CHECKPOINT_BYTES_PER_PARAM

    t, w = plan.training, plan.workload
    itype = load_catalog().get(t.instance_type)
    if itype is not None and itype.local_nvme:
        return None
    data_gb = w.data.dataset_size_gib * 2**30 / 1e9
    need = DEFAULT_VOLUME_GB + (data_gb if t.storage == "s3-file" else 0) + (data_gb if llm_trainer else 0)
    if t.parallelism:  # checkpoints kept locally before SageMaker uploads them, and the export
        params = w.model.parameters_billion * 1e9
        need += (t.parallelism.keep_checkpoints * CHECKPOINT_BYTES_PER_PARAM + 2) * params / 1e9
    return max(DEFAULT_VOLUME_GB, math.ceil(need * 1.1))  # 10% for the file system's own overhead


def submit(plan: Plan, *, entry_point: str, source_dir: str, estate: Estate) -> Submitted:
    """Start a SageMaker training job exactly as planned; returns without waiting."""
    from sagemaker.core.training.configs import (CheckpointConfig, Compute, Networking, OutputDataConfig,
                                                 SourceCode, StoppingCondition)
    from sagemaker.train import ModelTrainer
    from sagemaker.train.distributed import Torchrun

    from ..config.model import artifact_format
    from ..planning.train_commands import job_hyperparameters

    t, w = plan.training, plan.workload
    check_sagemaker_jobs(plan, command="submit")
    runtime = _runtime_seconds(plan)
    llm = is_llm_trainer(plan, source_dir=source_dir, entry_point=entry_point)
    # A Hugging Face directory is served as files under a prefix: upload the job's model uncompressed
    # (OutputDataConfig CompressionType NONE, SageMaker Developer Guide "Uncompressed model output").
    uncompressed = artifact_format(w)[0] == "huggingface"
    name = base_job_name(plan, "train", team=estate.team)
    trainer = ModelTrainer(
        sagemaker_session=_session(estate), role=estate.role_arn, base_job_name=name,
        training_image=training_image(plan),
        source_code=SourceCode(source_dir=source_dir, entry_script=entry_point),
        # Multi-device or multi-node: one process per GPU or NeuronCore, launched by torchrun.
        distributed=Torchrun() if w.model.framework == "pytorch" and (t.instance_count > 1 or t.accelerator_kind)
        else None,
        compute=Compute(instance_type=t.sagemaker_instance_type, instance_count=t.instance_count,
                        volume_kms_key_id=estate.volume_key(t.sagemaker_instance_type),
                        volume_size_in_gb=volume_gb(plan, llm_trainer=llm) or DEFAULT_VOLUME_GB,
                        enable_managed_spot_training=w.training.spot,
                        training_plan_arn=w.training.training_plan_arn),  # ResourceConfig TrainingPlanArn
        stopping_condition=StoppingCondition(max_runtime_in_seconds=runtime,
                                             max_wait_time_in_seconds=min(MAX_RUNTIME_S, 2 * runtime)
                                             if w.training.spot else None),
        # Spot interruptions resume from here; on-demand jobs keep them too.
        checkpoint_config=CheckpointConfig(s3_uri=f"s3://{estate.bucket}/{layout.CHECKPOINTS}{name}/"),
        # Network-isolated: SageMaker moves the data and checkpoints; the container reaches only its peers.
        networking=Networking(subnets=list(estate.subnets), security_group_ids=list(estate.security_groups),
                              enable_network_isolation=True),
        output_data_config=OutputDataConfig(s3_output_path=f"s3://{estate.bucket}/{layout.OUTPUT}",
                                            kms_key_id=estate.key_arn,
                                            compression_type="NONE" if uncompressed else "GZIP"),
        environment=job_environment(plan),
        # The shipped trainer's arguments: the channel's text and tokenizer, the plan's steps (train_commands).
        hyperparameters=job_hyperparameters(t.parallelism, speed=t.speed_flags, init_from=w.training.init_from) if llm else {},
        tags=estate.tags() or None,
    )
    channel = input_channel(plan, estate)
    channels, prepared = [channel], ""
    if llm:  # tokenized once, before the job, by one Processing job; the job reads its shards (prepare_job.py)
        from . import prepare_job

        if prepare_job.prepared(plan, estate):
            prepared = "already prepared"
        else:
            cpu_image = image_cache.retrieve(region=estate.region, image_scope="training",
                                             instance_type=prepare_job.INSTANCE_TYPE, **TRAINING_IMAGES[w.model.framework])
            prepared, status, why = prepare_job.run(plan, estate=estate, source_dir=source_dir, image=cpu_image,
                                                    session=_session(estate),
                                                    base_name=base_job_name(plan, "prepare", team=estate.team))
            if status != "Completed":  # one line, exit 1 (estate_commands.against_aws), and no training job
                raise EstateNotDeployed(f"prepare job {prepared} ended {status}: {why or 'see its CloudWatch logs'}; "
                                        "the training job was not started")
        channels.append(prepare_job.channel(plan, estate))
    trainer.train(input_data_config=channels, wait=False, logs=False)
    job = trainer._latest_training_job  # the SDK keeps the job it just created
    e = t.estimate
    kind = "on a training plan" if w.training.training_plan_arn else "on-demand"
    cost = f"{_money(e.usd_total)} {kind}" if e.usd_total is not None else f"{_money(e.usd_per_hour)}/h"
    if w.training.spot and e.spot_usd_total is not None:
        cost += f", about {_money(e.spot_usd_total)} with managed spot"
    return Submitted(job.training_job_name, t.sagemaker_instance_type, t.instance_count,
                     f"{t.storage} ({channel.input_mode})", w.training.spot, cost, prepared)


def job_model(described: dict) -> str:
    """Where a finished job's model is: model.tar.gz, or with CompressionType NONE the prefix of its files
    (<S3OutputPath>/<job>/output/model/)."""
    output = described["OutputDataConfig"]
    reported = described.get("ModelArtifacts", {}).get("S3ModelArtifacts", "")
    if output.get("CompressionType") == "NONE":
        return reported if reported.endswith("/") else \
            f"{output['S3OutputPath'].rstrip('/')}/{described['TrainingJobName']}/output/model/"
    return reported or f"{output['S3OutputPath'].rstrip('/')}/{described['TrainingJobName']}/output/model.tar.gz"


def _no_model(job_name: str, where: str, client=None) -> str:
    if client is not None and on_local_emulator(client):  # the emulator marks a job Completed without running it
        return (f"job {job_name} is Completed on the local emulator at {client.meta.endpoint_url}, which runs no "
                f"training container, so no model was written to {where}; nothing is wrong with the training script. "
                "The demo put a placeholder at each serving key already (tools/placeholder_artifacts.py); on AWS, "
                "promote copies the job's real model")
    return (f"job {job_name} is Completed but its model {where} is not there: the job wrote none (the training script "
            "saves it to SM_MODEL_DIR, /opt/ml/model) or it was moved or deleted since")


def on_local_emulator(client) -> bool:
    """The client talks to a server on this machine (`make emulator`'s AWS_ENDPOINT_URL), not to AWS."""
    return is_local(getattr(getattr(client, "meta", None), "endpoint_url", None))


def promote(plan: Plan, *, job_name: str, estate: Estate, sagemaker=None, s3=None) -> list[str]:
    """Copy a finished training job's model to every serving key of the plan that reads it as the job wrote it
    (a Hugging Face directory, or model.tar.gz), inside the dataset bucket; returns what was copied, one line each."""
    import boto3

    sagemaker = sagemaker or boto3.client("sagemaker", region_name=estate.region)
    s3 = s3 or boto3.client("s3", region_name=estate.region)
    described = sagemaker.describe_training_job(TrainingJobName=job_name)
    status = described.get("TrainingJobStatus")
    if status != "Completed":  # SageMaker uploads the model only when the job completes
        reason = f": {described['FailureReason']}" if described.get("FailureReason") else ""
        raise EstateNotDeployed(f"job {job_name} is {status}{reason}; promote copies the model of a Completed job"
                                + (" (run promote again when it has finished)" if status in ("InProgress", "Stopping")
                                   else ""))
    source = job_model(described)
    bucket, source_key = source.removeprefix("s3://").split("/", 1)
    if bucket != estate.bucket:
        raise EstateNotDeployed(f"job {job_name} wrote {source}, outside this estate's bucket {estate.bucket}")
    done = []
    for key in sorted({p.serving.artifact_key for p in plan.inference.values()
                       if p.serving is not None and p.serving.container != "vllm-neuronx"}):
        if source_key.endswith("/") != key.endswith("/"):
            continue  # a directory goes to a prefix, an archive to a key
        objects = [source_key] if not key.endswith("/") else [
            o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=source_key)
            for o in page.get("Contents", [])]
        if not objects:
            raise EstateNotDeployed(_no_model(job_name, source, s3))
        for obj in objects:
            target = key if not key.endswith("/") else key + obj.removeprefix(source_key)
            try:
                s3.copy_object(Bucket=bucket, Key=target, CopySource={"Bucket": bucket, "Key": obj})
            except Exception as exc:  # botocore's ClientError; S3 says NoSuchKey without the key
                if getattr(exc, "response", {}).get("Error", {}).get("Code") not in ("NoSuchKey", "404"):
                    raise
                raise EstateNotDeployed(_no_model(job_name, f"s3://{bucket}/{obj}", s3)) from None
        done.append(f"s3://{bucket}/{source_key} -> s3://{bucket}/{key} ({len(objects)} object(s))")
    if not done:
        raise EstateNotDeployed(f"no serving key of the plan reads what job {job_name} wrote ({source})")
    return done


def process(plan: Plan, *, code: str, input_prefix: str, output_prefix: str, instance_type: str,
            instance_count: int, estate: Estate) -> str:
    """A Processing job over several small instances, each given its shard of the input (ShardedByS3Key)."""
    from sagemaker.core.network import NetworkConfig
    from sagemaker.core.processing import ScriptProcessor
    from sagemaker.core.shapes import ProcessingInput, ProcessingOutput, ProcessingS3Input, ProcessingS3Output

    check_sagemaker_jobs(plan, command="process")
    raise_all(processing_prefix_errors(input_prefix=input_prefix, output_prefix=output_prefix))
    processor = ScriptProcessor(
        role=estate.role_arn, image_uri=processing_image(estate.region),
        command=["python3"], instance_count=instance_count, instance_type=instance_type,
        base_job_name=base_job_name(plan, "process", team=estate.team), sagemaker_session=_session(estate),
        network_config=NetworkConfig(subnets=list(estate.subnets), security_group_ids=list(estate.security_groups),
                                     enable_network_isolation=True),
        volume_kms_key=estate.volume_key(instance_type), output_kms_key=estate.key_arn, tags=estate.tags() or None,
    )
    processor.run(
        code=code,
        inputs=[ProcessingInput(input_name="input", s3_input=ProcessingS3Input(
            s3_uri=f"s3://{estate.bucket}/{input_prefix}", local_path="/opt/ml/processing/input",
            s3_data_type="S3Prefix", s3_input_mode="File", s3_data_distribution_type="ShardedByS3Key"))],
        outputs=[ProcessingOutput(output_name="output", s3_output=ProcessingS3Output(
            s3_uri=f"s3://{estate.bucket}/{output_prefix}", local_path="/opt/ml/processing/output",
            s3_upload_mode="EndOfJob"))],
        wait=False, logs=False,
    )
    return processor.latest_job.processing_job_name


def _money(value: float) -> str:
    return f"${value:,.0f}" if value >= 100 else f"${value:,.2f}"
