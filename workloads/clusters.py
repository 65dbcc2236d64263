"""What a training cluster runs beside its compute nodes, and how long an idle dynamic node lives: facts the planner,
the monthly estimate and the constructs share (pure Python)."""

from __future__ import annotations

# The Slurm (AWS PCS) cluster's login node group, and HyperPod's controller and login groups: always on.
SLURM_LOGIN_TYPE = "m5.xlarge"
HYPERPOD_HEAD_TYPES = {"controller": "ml.m5.xlarge", "login": "ml.m5.xlarge"}
# How long a dynamic Slurm node may sit idle before PCS ends it: the PCS default (CloudFormation, AWS::PCS::Cluster
# SlurmConfiguration ScaleDownIdleTimeInSeconds, "Default: 600"), set explicitly so the plan can say it. Ten minutes
# keeps the nodes between chained jobs (a node boots and registers in minutes) and bills at most ten idle minutes
# after the last job.
SCALE_DOWN_IDLE_S = 600
