"""The nodes a training cluster keeps running beside its training nodes, all month: one definition for the
constructs that launch them (constructs_lib/slurm_cluster.py, constructs_lib/hyperpod_cluster.py) and the monthly
estimate that prices them (estimates.monthly). The training nodes themselves are the training run's."""

from __future__ import annotations

SLURM_LOGIN_TYPE = "m5.xlarge"  # PCS: one small login node, reached through SSM Session Manager
HYPERPOD_CONTROLLER_TYPE = "ml.m5.xlarge"  # HyperPod's Slurm controller group
HYPERPOD_LOGIN_TYPE = "ml.m5.xlarge"


def standing_nodes(orchestrator: str) -> tuple[tuple[str, str, int], ...]:
    """(what, instance type, count) of the nodes that run all month on this orchestrator's cluster."""
    if orchestrator == "slurm":
        return (("Slurm login node", SLURM_LOGIN_TYPE, 1),)
    if orchestrator == "hyperpod":
        return (("HyperPod controller node", HYPERPOD_CONTROLLER_TYPE, 1),
                ("HyperPod login node", HYPERPOD_LOGIN_TYPE, 1))
    return ()
