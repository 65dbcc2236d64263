"""The nodes a training cluster keeps running beside its training nodes, all month: one definition for the
constructs that launch them (constructs_lib/slurm_cluster.py, constructs_lib/hyperpod_cluster.py) and the monthly
estimate that prices them (estimates.monthly), and how long an idle dynamic compute node lives (pure Python). The
training nodes themselves are the training run's."""

from __future__ import annotations

SLURM_LOGIN_TYPE = "m5.xlarge"  # PCS: one small login node, reached through SSM Session Manager
HYPERPOD_CONTROLLER_TYPE = "ml.m5.xlarge"  # HyperPod's Slurm controller group
HYPERPOD_LOGIN_TYPE = "ml.m5.xlarge"
# How long a dynamic Slurm node may sit idle before PCS ends it: the PCS default (CloudFormation, AWS::PCS::Cluster
# SlurmConfiguration ScaleDownIdleTimeInSeconds, "Default: 600"), set explicitly so the plan can say it. Ten minutes
# keeps the nodes between chained jobs (a node boots and registers in minutes) and bills at most ten idle minutes
# after the last job.
SCALE_DOWN_IDLE_S = 600


def standing_nodes(orchestrator: str) -> tuple[tuple[str, str, int], ...]:
    """(what, instance type, count) of the nodes that run all month on this orchestrator's cluster."""
    if orchestrator == "slurm":
        return (("Slurm login node", SLURM_LOGIN_TYPE, 1),)
    if orchestrator == "hyperpod":
        return (("HyperPod controller node", HYPERPOD_CONTROLLER_TYPE, 1),
                ("HyperPod login node", HYPERPOD_LOGIN_TYPE, 1))
    return ()
