"""The commands that train the plan's model where the stacks put it: the Slurm cluster's Submit line (PCS and
HyperPod) and a SageMaker training job's arguments. One definition: the TrainStack prints the first, `submit`
passes the second, and the golden-path test runs both, scaled down.

Both read the dataset as the bucket holds it (layout.TEXT and layout.TOKENIZER), tokenized once first (the prepare
step, examples/slurm/prepare.py: a Slurm job on the cluster, a Processing job before a SageMaker job,
commands/prepare_job.py), train the plan's steps (an encoder classifier: its epochs) and export the model with its
tokenizer where serving reads it: on a cluster through the FSx link of /fsx/output, from a job through SM_MODEL_DIR.
"""

from __future__ import annotations

import shlex

from . import layout

EXAMPLES_ON_NODE = "/opt/ml-estate/examples"
SEQUENCE_CLASSIFICATION = "sequence-classification"  # encoder.TASK, what the layout's `task` says
TARBALL = ".tar.gz"  # an export path that is the framework archive itself (a classifier's model.tar.gz)  # where the node image and HyperPod's lifecycle script put them


NXDT_SCRIPT = "train-nxdt.sbatch"  # NxD Training on Trn1 (planning/nxd.py): its layout carries the config


def sbatch_script(accelerator_kind: str | None, parallelism=None) -> str:
    if parallelism is not None and parallelism.nxdt:
        return NXDT_SCRIPT
    return "train-trainium.sbatch" if accelerator_kind == "trainium" else "train-gpu.sbatch"


def tokens_dir(export_dir: str, workload: str) -> str:
    """The prepare step's shards on FSx, named like the model they train."""
    name = export_dir.rstrip("/").rsplit("/", 1)[-1] if export_dir else workload
    return f"{layout.FSX_TOKENS}/{name}"


def training_arguments(*, data: str, tokenizer: str, steps: int, export_dir: str = "", text: str = "",
                       speed: tuple[str, ...] = (), init_from: str = "") -> list[str]:
    """train.py's arguments beyond the layout: the shards, the tokenizer the export carries, the plan's steps, the
    precision and compiler it is priced at (`speed`: precision.trainer_flags, e.g. --precision fp8 --compile), and the
    base model a fine-tune starts from."""
    args = ["--data", data, "--tokenizer", tokenizer, *speed]
    if init_from:
        args += ["--init-from", init_from]
    if text:
        args += ["--text", text]  # a job tokenizes on its own nodes first (train.py's prepare step)
    if steps:
        args += ["--steps", str(steps)]
    if export_dir:
        args += ["--export-dir", export_dir]
    return args


def classifies(parallelism) -> bool:
    """An encoder classifier's layout (planning/encoder.py): train.py hands it to classifier.py."""
    return parallelism is not None and parallelism.task == SEQUENCE_CLASSIFICATION


def prepare_task(parallelism) -> list[str]:
    """prepare.py's task: labelled examples of the plan's sequence for a classifier, else the token stream."""
    return ["--task", SEQUENCE_CLASSIFICATION, "--seq", str(parallelism.sequence)] if classifies(parallelism) else []


def planned_steps(parallelism) -> int:
    """The plan's steps for a language model; none for a classifier, whose steps are its epochs (the layout's) over
    the examples the prepare step found, which the trainer counts (the plan's are from an estimate of the data)."""
    return parallelism.steps if parallelism and not classifies(parallelism) else 0


def base_model(init_from: str | None, *, job: bool) -> str:
    """training.init_from where the trainer reads it: a datasets/ key on FSx (/fsx/datasets/...) or in a job's train
    channel; an FSx path as it is (the schema refuses one for SageMaker jobs)."""
    if not init_from or init_from.startswith(layout.FSX_MOUNT + "/"):
        return init_from or ""
    return layout.in_job(init_from) if job else layout.on_fsx(init_from)


def slurm_submit(*, workload: str, nodes: int, accelerator_kind: str | None, parallelism,
                 auto_resume: bool = False, speed: tuple[str, ...] = (), init_from: str | None = None) -> str:
    """The prepare job on every node, then the training job once it succeeded (afterok; a failed prepare cancels it
    instead of leaving it pending), from /fsx. The jobs are named after the workload: the sbatch scripts keep
    checkpoints in /fsx/checkpoints/<job name>, one folder per workload (train.py refuses another run's).
    `auto_resume` (HyperPod): the training job runs its step with HyperPod's `srun --auto-resume=1` (SageMaker
    Developer Guide, https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-resiliency-slurm-auto-resume.html);
    on PCS the script's `#SBATCH --requeue` puts the job back in the queue after a node failure instead."""
    text, tokenizer = layout.on_fsx(layout.TEXT), layout.on_fsx(layout.TOKENIZER)
    export = parallelism.export_dir if parallelism else ""
    shards = tokens_dir("" if export.endswith(TARBALL) else export, workload)
    prepare = ["sbatch", "--parsable", f"--job-name={workload}-prepare", f"--nodes={nodes}",
               f"{EXAMPLES_ON_NODE}/prepare.sbatch",
               "--input", text, "--tokenizer", tokenizer, "--output", shards, *prepare_task(parallelism)]
    # WORKLOAD_NAME: the Workload dimension of the trainer's metrics (evaluation.py), which the dashboard reads
    train = ["--kill-on-invalid-dep=yes", f"--job-name={workload}-train", f"--nodes={nodes}",
             f"--export=ALL,WORKLOAD_NAME={workload}"]
    if parallelism:  # the plan's stop budget: Slurm signals this early, so the checkpoint is written in time
        train.append(f"--signal=TERM@{parallelism.signal_lead_s}")
    train.append(f"{EXAMPLES_ON_NODE}/{sbatch_script(accelerator_kind, parallelism)}")
    train += training_arguments(data=shards, tokenizer=tokenizer, steps=planned_steps(parallelism),
                               export_dir=export, speed=speed, init_from=base_model(init_from, job=False))
    # --parsable prints "id" or, on a multi-cluster setup, "id;cluster": ${prep%%;*} is the id either way.
    return (f"cd {layout.FSX_MOUNT} && prep=$({shlex.join(prepare)}) && "
            f"{'AUTO_RESUME=1 ' if auto_resume else ''}sbatch --dependency=afterok:${{prep%%;*}} {shlex.join(train)}")


def job_hyperparameters(parallelism, *, speed: tuple[str, ...] = (), init_from: str | None = None) -> dict[str, str]:
    """A SageMaker job's train.py arguments (the SDK passes hyperparameters as --key value): the shards the prepare
    job wrote once (its `tokens` channel: commands/prepare_job.py), the train channel's tokenizer, the plan's steps,
    its precision and compiler; the export goes to SM_MODEL_DIR (train.py's default there). A bare flag (--compile) has no value to pass there: it goes as `--compile true`."""
    args = training_arguments(data=layout.JOB_TOKENS_CHANNEL, tokenizer=layout.in_job(layout.TOKENIZER),
                              steps=planned_steps(parallelism),
                              init_from=base_model(init_from, job=True))
    out = {flag.removeprefix("--"): value for flag, value in zip(args[::2], args[1::2])}
    flags = list(speed)
    while flags:
        flag = flags.pop(0).removeprefix("--")
        out[flag] = flags.pop(0) if flags and not flags[0].startswith("--") else "true"
    return out
