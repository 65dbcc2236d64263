"""The prepare step of a SageMaker training job, once: a Processing job tokenizes the dataset's text (or an encoder
classifier's labelled examples) into shards under processed/tokens/<workload>/ before the training job starts, and
the training job reads them through its `tokens` channel. Before: every node of the job tokenized the whole dataset
itself before step 1 (hours for 200 GB), outside the plan's hours and on GPU instances billed while they did.

The job runs examples/slurm/prepare.py (with classify_data.py beside it) on one CPU instance in the training image
(the same Python and tokenizers the trainer has: its CPU build), network-isolated in the estate's subnet, and writes
the shards when it ends (EndOfJob upload). `submit` waits for it, then starts the training job; shards already
complete there (meta.json and every task's done marker) are not prepared again.
"""

from __future__ import annotations

import math

from ..planning import layout
from ..planning.planner import Plan
from ..planning.train_commands import prepare_task

# Tokenizing is CPU work that prepare.py spreads over the cores: 36 vCPUs, a processing instance type
# (botocore sagemaker service-2.json ProcessingInstanceType lists ml.c5.9xlarge).
INSTANCE_TYPE = "ml.c5.9xlarge"
INPUT, OUTPUT = "/opt/ml/processing/input/data", "/opt/ml/processing/output"  # the container's paths
CHANNEL = "tokens"  # the training job's channel of the shards: /opt/ml/input/data/tokens
DEFAULT_VOLUME_GB = 30


def tokens_prefix(plan: Plan) -> str:
    """Where the shards go: under processed/, which `process` jobs may write and training jobs read."""
    return f"{layout.PROCESSED}tokens/{plan.workload.name}/"


def arguments(plan: Plan) -> list[str]:
    """prepare.py's command line inside the Processing job: the text and tokenizer of the datasets/ input."""
    text = INPUT + "/" + layout.TEXT.removeprefix(layout.DATASETS).rstrip("/")
    tokenizer = INPUT + "/" + layout.TOKENIZER.removeprefix(layout.DATASETS).rstrip("/")
    return ["--input", text, "--tokenizer", tokenizer, "--output", OUTPUT, "--part", "0", "--parts", "1",
            *prepare_task(plan.training.parallelism)]


def volume_gb(plan: Plan) -> int:
    """The dataset copied in (File mode) and its shards (at most its size), over SageMaker's 30 GB default."""
    data_gb = plan.workload.data.dataset_size_gib * 2**30 / 1e9
    return max(DEFAULT_VOLUME_GB, math.ceil((DEFAULT_VOLUME_GB + 2 * data_gb) * 1.1))


def prepared(plan: Plan, estate, s3=None) -> bool:
    """Whether complete shards are already there: meta.json and the one task's done marker."""
    import boto3

    s3 = s3 or boto3.client("s3", region_name=estate.region)
    listed = s3.list_objects_v2(Bucket=estate.bucket, Prefix=tokens_prefix(plan), MaxKeys=1000)
    names = {o["Key"].removeprefix(tokens_prefix(plan)) for o in listed.get("Contents", [])}
    return {"meta.json", "done-0-of-1"} <= names


def run(plan: Plan, *, estate, source_dir: str, image: str, session, base_name: str) -> tuple[str, str, str]:
    """Start the Processing job and wait for it: (its name, its status, why it failed or ""). `image`: the training
    image built for INSTANCE_TYPE; `session`, `base_name`: the job's SDK session and name (jobs.py)."""
    import boto3
    from sagemaker.core.network import NetworkConfig
    from sagemaker.core.processing import FrameworkProcessor
    from sagemaker.core.shapes import ProcessingInput, ProcessingOutput, ProcessingS3Input, ProcessingS3Output

    processor = FrameworkProcessor(
        image_uri=image, role=estate.role_arn, command=["python3"], instance_count=1, instance_type=INSTANCE_TYPE,
        volume_size_in_gb=volume_gb(plan), volume_kms_key=estate.volume_key(INSTANCE_TYPE),
        output_kms_key=estate.key_arn, base_job_name=base_name, sagemaker_session=session,
        tags=estate.tags() or None,
        network_config=NetworkConfig(subnets=list(estate.subnets), security_group_ids=list(estate.security_groups),
                                     enable_network_isolation=True))
    processor.run(
        code="prepare.py", source_dir=source_dir, arguments=arguments(plan),
        inputs=[ProcessingInput(input_name="datasets", s3_input=ProcessingS3Input(
            s3_uri=f"s3://{estate.bucket}/{layout.DATASETS}", local_path=INPUT, s3_data_type="S3Prefix",
            s3_input_mode="File", s3_data_distribution_type="FullyReplicated"))],
        outputs=[ProcessingOutput(output_name=CHANNEL, s3_output=ProcessingS3Output(
            s3_uri=f"s3://{estate.bucket}/{tokens_prefix(plan)}", local_path=OUTPUT, s3_upload_mode="EndOfJob"))],
        wait=True, logs=False)
    name = processor.latest_job.processing_job_name
    ended = boto3.client("sagemaker", region_name=estate.region).describe_processing_job(ProcessingJobName=name)
    return name, ended["ProcessingJobStatus"], ended.get("FailureReason", "")


def channel(plan: Plan, estate):
    """The training job's `tokens` channel: the shards, copied to every node (File, FullyReplicated)."""
    from sagemaker.core.shapes import Channel, DataSource, S3DataSource

    source = DataSource(s3_data_source=S3DataSource(
        s3_data_type="S3Prefix", s3_uri=f"s3://{estate.bucket}/{tokens_prefix(plan)}",
        s3_data_distribution_type="FullyReplicated"))
    return Channel(channel_name=CHANNEL, data_source=source, input_mode="File")
