"""What an estate launches, instance type by instance type: the instances the plan names and the ones the stacks add
around them (the Slurm login node and HyperPod's controller and login nodes, cluster_nodes.py; the node image's build
instance). Pure Python: the constructs take those types from the same definitions, and `python -m workloads
preflight` counts quotas and zone offerings from this list, so the two cannot drift apart."""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog import ML_PREFIX
from .cluster_nodes import HYPERPOD_CONTROLLER_TYPE, HYPERPOD_LOGIN_TYPE, SLURM_LOGIN_TYPE
from .planner import Plan

NODE_IMAGE_BUILD_TYPE = "m5.2xlarge"  # the Image Builder instance that bakes the node image, during the deploy

EC2 = "ec2"  # launched by EC2 in the account (PCS node groups, Image Builder): EC2 quotas and zone offerings apply
# SageMaker usages: each has a quota per instance type, "<ml type> for <usage> usage" (Service Quotas, SageMaker).
CLUSTER, TRAINING, SPOT_TRAINING, ENDPOINT, TRANSFORM, NOTEBOOK = (
    "cluster", "training job", "spot training job", "endpoint", "transform job", "notebook instance")


@dataclass(frozen=True)
class Launch:
    instance_type: str  # EC2 name for EC2 launches, ml. name for SageMaker ones
    count: int  # at most, at once
    usage: str  # EC2, or the SageMaker usage its quota is named after
    what: str  # what the instances are, for messages
    field: str  # the config field that chose them
    in_zone: bool = False  # EC2 instances in availability_zone's subnet: the zone must offer the type
    reserved: str = ""  # launched into reserved capacity (a capacity reservation or a training plan): which

    @property
    def ec2_type(self) -> str:
        return self.instance_type.removeprefix(ML_PREFIX)


def launches(plan: Plan) -> tuple[Launch, ...]:
    """Every instance the deployed estate may run at once, from training to serving."""
    return (*_training(plan), *_notebook(plan), *_serving(plan))


def _training(plan: Plan) -> tuple[Launch, ...]:
    t, w = plan.training, plan.workload
    if t.orchestrator == "slurm":
        return (Launch(t.instance_type, t.instance_count, EC2, "the Slurm compute nodes", "training.instance_type",
                       in_zone=True, reserved=t.capacity_reservation_id or ""),
                Launch(SLURM_LOGIN_TYPE, 1, EC2, "the Slurm login node", "training.orchestrator", in_zone=True),
                Launch(NODE_IMAGE_BUILD_TYPE, 1, EC2, "the node image's build instance (during the deploy)",
                       "training.orchestrator", in_zone=True))
    if t.orchestrator == "hyperpod":
        return (Launch(t.sagemaker_instance_type, t.instance_count, CLUSTER, "the HyperPod workers",
                       "training.instance_type", reserved=w.training.training_plan_arn or ""),
                Launch(HYPERPOD_CONTROLLER_TYPE, 1, CLUSTER, "the HyperPod controller node", "training.orchestrator"),
                Launch(HYPERPOD_LOGIN_TYPE, 1, CLUSTER, "the HyperPod login node", "training.orchestrator"))
    usage = SPOT_TRAINING if w.training.spot else TRAINING
    return (Launch(t.sagemaker_instance_type, t.instance_count, usage, "the SageMaker training job",
                   "training.instance_type"),)


def _notebook(plan: Plan) -> tuple[Launch, ...]:
    nb = plan.workload.notebook
    return (Launch(nb.instance_type, 1, NOTEBOOK, "the notebook", "notebook.instance_type"),) if nb else ()


def _serving(plan: Plan) -> tuple[Launch, ...]:
    out = []
    for kind, ip in plan.inference.items():
        if ip.instance_type is None:  # serverless: no instances, a concurrency quota (preflight checks it)
            continue
        usage = TRANSFORM if kind == "batch" else ENDPOINT
        out.append(Launch(ip.instance_type, ip.max_instances, usage, f"the {kind} endpoint's instances at most"
                          if usage == ENDPOINT else "the batch transform job's instances",
                          f"inference.{kind}.instance_type"))
    return tuple(out)
