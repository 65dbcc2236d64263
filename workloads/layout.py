"""Where things live in the dataset bucket: one definition for the stacks (IAM grants, endpoint
paths) and for the commands that write there (`submit`, `process`, `invoke`)."""

DATASETS = "datasets/"
OUTPUT = "output/"  # SageMaker training jobs' output
MODELS = "models/"  # what the serving contract reads (serving.DEFAULT_KEYS): trained models, exported from /fsx/output
CHECKPOINTS = "checkpoints/"
JOBS = "jobs/"  # job source code uploaded by `python -m workloads submit|process`
PROCESSED = "processed/"  # what `python -m workloads process` writes by default
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
