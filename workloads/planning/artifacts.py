"""The artifacts an estate serves, each with the object that proves it is uploaded and the one line that says how to
put it there: the InferenceStack's deploy-time check (constructs_lib/endpoints/artifact_check.py) reports that line
when the object is missing, and the demo uploads a placeholder to the same keys. Pure Python."""

from __future__ import annotations

from dataclasses import dataclass

from . import layout
from .contracts import proof_key
from .run_length import FSX_OUTPUT_DIR
from .serving import InferencePlan
from .training import TrainingPlan

BUCKET = "{bucket}"  # where `put` names the dataset bucket (known only at deploy time)


@dataclass(frozen=True)
class ArtifactCheck:
    """An object the endpoints read from the dataset bucket, and how to put it there."""
    artifact: str  # what the models read: a directory prefix (ends with /) or one archive
    key: str  # the object HeadObject looks for (serving.proof_key)
    kinds: tuple[str, ...]  # the inference kinds that read it
    put: str  # how to put it there, one line, with BUCKET for the dataset bucket's name

    def put_in(self, bucket: str) -> str:
        return self.put.replace(BUCKET, bucket)


def exported_key(t: TrainingPlan) -> str | None:
    """Where the trainer's export lands in the bucket: the FSx link writes /fsx/output/NAME/ to models/NAME/."""
    export = t.parallelism.export_dir if t.parallelism else ""
    if not (export and t.fsx):
        return None
    name = export.removeprefix(FSX_OUTPUT_DIR + "/").strip("/")
    return layout.MODELS + name + ("" if name.endswith(".tar.gz") else "/")  # an archive, or a directory prefix


def _put(artifact: str, ip: InferencePlan, t: TrainingPlan, target_cli: str) -> str:
    assert ip.serving is not None
    target = f"s3://{BUCKET}/{artifact}"
    if ip.serving.container == "vllm-neuronx":
        return (f"export the model for Neuron with the plan's settings (optimum-cli export neuron, see `python -m "
                f"workloads plan`), then aws s3 sync <neuron export dir> {target}")
    if artifact.endswith("/"):
        sync = f"aws s3 sync <local export dir> {target}"
        if t.orchestrator == "sagemaker-jobs":
            sync = (f"python -m workloads submit {target_cli}, then python -m workloads promote {target_cli} "
                    f"--job <training job> (copies its model here); or aws s3 sync <local export dir> {target}")
        if exported_key(t) == artifact:
            return (f"train first: train.py exports {t.parallelism.export_dir} and the file system's link writes it "
                    f"there; or {sync}")
        return sync
    copy = f"aws s3 cp <local model.tar.gz> {target} ({ip.serving.artifact_layout})"
    if exported_key(t) == artifact:  # an encoder classifier's archive, packed by the trainer on FSx
        return f"train first: train.py exports {t.parallelism.export_dir} and the file system's link writes it there; or {copy}"
    if t.orchestrator == "sagemaker-jobs":
        return (f"python -m workloads submit {target_cli}, then python -m workloads promote {target_cli} "
                f"--job <training job> (copies its model.tar.gz here); or {copy}")
    return copy


def artifact_checks(training: TrainingPlan, inference: dict[str, InferencePlan], *,
                    workload: str = "WORKLOAD") -> tuple[ArtifactCheck, ...]:
    """One check per artifact the inference kinds read (kinds sharing a key share its check), in kind order.
    `workload`: what the job commands take to find this estate (`small`, or `small --stage vision`)."""
    found: dict[str, ArtifactCheck] = {}
    for kind, ip in inference.items():
        if ip.serving is None:
            continue
        artifact = ip.serving.artifact_key
        first = found.get(artifact)
        found[artifact] = ArtifactCheck(artifact, proof_key(artifact), (*first.kinds, kind), first.put) if first else \
            ArtifactCheck(artifact, proof_key(artifact), (kind,), _put(artifact, ip, training, workload))
    return tuple(found.values())
