"""Where things live in the dataset bucket: one definition for the stacks (IAM grants, endpoint
paths) and for the commands that write there (`submit`, `process`, `invoke`)."""

DATASETS = "datasets/"
OUTPUT = "output/"
CHECKPOINTS = "checkpoints/"
JOBS = "jobs/"  # job source code uploaded by `python -m workloads submit|process`
PROCESSED = "processed/"
CAPTURE = "inference/capture/"
ASYNC_INPUT = "inference/async/input/"
ASYNC_OUTPUT = "inference/async/output/"
ASYNC_FAILURE = "inference/async/failure/"
BATCH_INPUT = "inference/batch/input/"
BATCH_OUTPUT = "inference/batch/output/"
