"""Where things live in the dataset bucket: one definition for the stacks (IAM grants, endpoint
paths) and for the commands that write there (`submit`, `process`, `invoke`)."""

DATASETS = "datasets/"
OUTPUT = "output/"  # SageMaker training jobs' output
MODELS = "models/"  # what the serving contract reads (serving.DEFAULT_KEYS): trained models, exported from /fsx/output
CHECKPOINTS = "checkpoints/"
JOBS = "jobs/"  # job source code uploaded by `python -m workloads submit|process`
PROCESSED = "processed/"
# What a language model trains on, inside the dataset: raw text the prepare step tokenizes (*.txt, or *.jsonl with a
# "text" field per line) and the tokenizer's Hugging Face files (tokenizer.json, tokenizer_config.json, ...), which
# the trainer also copies into its export for the serving container.
TEXT = DATASETS + "text/"
TOKENIZER = DATASETS + "tokenizer/"  # what `python -m workloads process` writes by default
CAPTURE = "inference/capture/"
ASYNC_INPUT = "inference/async/input/"
ASYNC_OUTPUT = "inference/async/output/"
ASYNC_FAILURE = "inference/async/failure/"
BATCH_INPUT = "inference/batch/input/"
BATCH_OUTPUT = "inference/batch/output/"

# What a processing job (`python -m workloads process`) may read and write: the training role's grants for processing
# jobs (constructs_lib/training_role.py) and the command's check of --input/--output both come from here. It reads the
# dataset or an earlier step's output, and writes only processed/: never the dataset of record, checkpoints or models.
PROCESSING_READS = (DATASETS, PROCESSED)
PROCESSING_WRITES = (PROCESSED,)

# What FSx for Lustre links, one data repository association per prefix (the rest of the bucket, inference data
# and job code included, is never on the file system):
# (file system path, bucket prefix, import events, export events).
FSX_LINKS = (
    # The dataset of record: imported only, so nothing done on /fsx changes or deletes it.
    ("/datasets", DATASETS, ("NEW", "CHANGED", "DELETED"), ()),
    # Written on the cluster and kept in S3; imported too, so a new file system resumes from them.
    ("/checkpoints", CHECKPOINTS, ("NEW", "CHANGED", "DELETED"), ("NEW", "CHANGED", "DELETED")),
    # The trained model: the trainer exports /fsx/output/NAME/ as a Hugging Face directory and the link puts it at
    # models/NAME/, exactly where the serving contract reads it (export only: nothing in S3 overwrites a run's output).
    ("/output", MODELS, (), ("NEW", "CHANGED", "DELETED")),
)

# How long the versioned bucket keeps a version once it is overwritten or deleted (noncurrent), per prefix. Versions
# protect the dataset and models from a mistaken overwrite; but the trainer rotates checkpoints (it keeps its last
# few and deletes the rest) and the file system exports each deletion, so a rotated checkpoint would stay billed as a
# noncurrent version forever. Where rules overlap S3 honours the shorter expiration (Amazon S3 User Guide, "How
# Amazon S3 handles conflicts in lifecycle configurations":
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/lifecycle-conflicts.html).
NONCURRENT_DAYS = (("", 30), (CHECKPOINTS, 1))
# Parts of an upload that never completed (a node lost mid-export) are billed until aborted.
INCOMPLETE_UPLOAD_DAYS = 7

# Where the cluster sees them: FSx for Lustre is mounted at /fsx on every node (login and compute) and links the
# prefixes above; the prepare step's token shards stay on the file system (rebuilt from the text, never exported).
FSX_MOUNT = "/fsx"
FSX_TOKENS = FSX_MOUNT + "/tokens"
# Where a SageMaker training job sees them: the `train` channel is the datasets/ prefix (jobs.input_channel), and
# SageMaker uploads what the job leaves in SM_MODEL_DIR (/opt/ml/model) to output/<job>/output/model/.
JOB_CHANNEL = "/opt/ml/input/data/train"
JOB_TOKENS = "/tmp/tokens"  # node-local: where train.py --text tokenizes on its own (a job run by hand)
# The prepare job's shards (commands/prepare_job.py: processed/tokens/<workload>/) as the training job's `tokens`
# channel: tokenized once before the job, copied to every node.
JOB_TOKENS_CHANNEL = "/opt/ml/input/data/tokens"


def on_fsx(prefix: str) -> str:
    """A dataset-bucket prefix as the cluster's path (FSX_LINKS): datasets/text/ -> /fsx/datasets/text."""
    for path, linked, _, _ in FSX_LINKS:
        if prefix.startswith(linked):
            return (FSX_MOUNT + path + "/" + prefix.removeprefix(linked)).rstrip("/")
    raise ValueError(f"{prefix} is not linked to the file system")


def in_job(prefix: str) -> str:
    """A datasets/ prefix as a SageMaker job's train channel sees it: datasets/text/ -> /opt/ml/input/data/train/text."""
    assert prefix.startswith(DATASETS), prefix
    return (JOB_CHANNEL + "/" + prefix.removeprefix(DATASETS)).rstrip("/")
