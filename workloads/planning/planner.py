"""The planner: one Workload -> one Plan (training, then serving), the choices with the reasons the plan prints.

Pure Python (never imports aws_cdk or sagemaker). The two halves live apart: training.py and serving.py.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..catalog import ML_PREFIX, Catalog, load_catalog
from ..config.model import model_lines
from ..config.schema import Workload
from ..config.validators import advice, hosting_zones
from ..errors import WARNING, Finding
from . import layout
from .artifacts import exported_key
from .cluster_nodes import standing_nodes
from .estimates import Monthly, monthly
from .fp8_serving import fp8_findings
from .unmeasured import unmeasured_findings
from .hosts import host_findings
from .serving import TRAINING_ONLY, InferencePlan, plan_inference
from .training import TrainingPlan, plan_training
from .training_estimate import calibration_lines


@dataclass(frozen=True)
class Plan:
    """A workload's whole plan: training, every endpoint, zones, the month's cost and the findings."""
    workload: Workload
    training: TrainingPlan
    inference: dict[str, InferencePlan]
    calibration: tuple[str, ...] = field(default=())
    # Hosted endpoints' subnets: the cluster's zone first, then a second (SageMaker asks for two).
    hosting_zones: tuple[str, ...] = field(default=())
    monthly: Monthly | None = None  # the whole estate a month, and the headline (one training run plus a month)
    # WARNING and INFO findings: the config's own (validators.advice) and the planner's, in that order.
    findings: tuple[Finding, ...] = field(default=())
    # The model's way from training to serving, one line a step (train_to_serve).
    path: tuple[str, ...] = field(default=())
    # The model's architecture (set or inferred, and why) and a decoder's shape as sized (config/model.py model_lines).
    model: tuple[str, ...] = field(default=())

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.level == WARNING)

    def to_dict(self) -> dict:
        out = {
            "workload": self.workload.model_dump(by_alias=True, mode="json"),
            "training": asdict(self.training),
            "inference": {kind: asdict(p) for kind, p in self.inference.items()},
            "calibration": list(self.calibration),
            "hosting_zones": list(self.hosting_zones),
            "warnings": [f.as_dict() for f in self.warnings],
            "info": [f.as_dict() for f in self.findings if f.level != WARNING],
            "path": list(self.path),
            "model": list(self.model),
        }
        out["estimates"] = out["training"].pop("estimate")
        out["estimates"]["monthly"] = asdict(self.monthly) if self.monthly else None
        out["training"].pop("findings")  # shown once, above
        return out


def plan(w: Workload, cat: Catalog | None = None, *, allowed_families: list[str] | None = None) -> Plan:
    """`allowed_families`: a team's; the plan then compares and chooses only those."""
    cat = (cat or load_catalog()).for_families(allowed_families)
    training = plan_training(w, cat)
    inference = plan_inference(w, cat)
    notebook = cat.get(w.notebook.instance_type) if w.notebook else None
    price = notebook.price(w.region, sagemaker=True) if notebook else None
    full = load_catalog()  # the cluster's own nodes, whatever families a team may choose
    standing = tuple((what, name, count, full.get(name).price(w.region, sagemaker=name.startswith(ML_PREFIX)))
                     for what, name, count in standing_nodes(training.orchestrator))
    return Plan(
        workload=w,
        training=training,
        inference=inference,
        calibration=calibration_lines(cat) if training.estimate.flops is not None else (),
        hosting_zones=hosting_zones(w, cat),
        monthly=monthly(w, training, inference, price, standing),
        findings=(*advice(w, cat), *training.findings, *host_findings(inference), *fp8_findings(inference),
                  *unmeasured_findings(inference)),
        path=train_to_serve(training, inference),
        model=model_lines(w),
    )


def train_to_serve(t: TrainingPlan, inference: dict[str, InferencePlan]) -> tuple[str, ...]:
    """Trained where, exported where (the FSx link of /fsx/output puts it under the bucket's models/ prefix, or a
    SageMaker job's model archive under output/), and served where, by which container, from which key."""
    lines = [f"trained on {t.instance_count} x {t.instance_type} ({t.orchestrator})"]
    key = exported_key(t)
    if key:
        export = t.parallelism.export_dir if t.parallelism else ""
        who = ("NxD Training's checkpoint_converter.py (the launcher converts the last checkpoint)"
               if t.parallelism and t.parallelism.nxdt else "train.py")
        what = ("model.tar.gz (a Hugging Face directory with code/inference.py, the Ray Serve application)"
                if key.endswith(".tar.gz") else "a Hugging Face directory")
        lines.append(f"exported by {who} as {what} to {export}, which the file system's link "
                     f"writes to s3://<DatasetBucketName>/{key}")
    elif t.orchestrator == "sagemaker-jobs":
        directory = any(ip.serving and ip.serving.artifact_key.endswith("/") for ip in inference.values())
        what = ("the trainer writes a Hugging Face directory to SM_MODEL_DIR (/opt/ml/model), which SageMaker uploads "
                f"uncompressed to s3://<DatasetBucketName>/{layout.OUTPUT}<job>/output/model/") if directory else \
            (f"the job's model (/opt/ml/model) is uploaded to s3://<DatasetBucketName>/{layout.OUTPUT}<job>/output/"
             "model.tar.gz")
        lines.append(f"{what}; copy it to the "
                     + ("keys below" if inference else "serving key once the workload has an inference section")
                     + " with `python -m workloads promote <workload> --job <job>`")
    for kind, ip in inference.items():
        if ip.serving is None:
            continue
        where = f"ml.{ip.instance_type.removeprefix('ml.')}" if ip.instance_type else "serverless"
        compiled = " (the Neuron export of it: see the serving contract)" if ip.serving.container == "vllm-neuronx" \
            else ""
        how = "served serverless by" if kind == "serverless" else f"served {kind} on {where} by"
        if ip.serving.drain == "async":  # no transform host runs the image (hosts.drain_route)
            how = f"batch drained through the async endpoint on {inference['async'].instance_type} by"
        lines.append(f"{how} {ip.serving.container_title}, reading "
                     f"s3://<DatasetBucketName>/{ip.serving.artifact_key}{compiled}")
    if not inference:
        lines.append(TRAINING_ONLY)
    return tuple(lines)
