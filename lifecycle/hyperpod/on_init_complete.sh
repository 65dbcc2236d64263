#!/bin/bash
# HyperPod lifecycle script (extended mode): runs on every node after HyperPod has configured
# Slurm (API-driven Slurm orchestrator) and mounted FSx for Lustre at /fsx.
# It checks the mount, sets the EFA environment for jobs, ships the example jobs and the plan's layout, and
# installs the plan's pinned training stack on the accelerated nodes.
set -euxo pipefail
exec > >(tee -a /var/log/ml-estate-lifecycle.log) 2>&1
HERE="$(cd "$(dirname "$0")" && pwd)"

# /fsx: wait for the FSx for Lustre mount HyperPod makes from the cluster's storage config.
for _ in $(seq 1 60); do
  mountpoint -q /fsx && break
  sleep 5
done
if mountpoint -q /fsx; then
  # As constructs_lib/node_bootstrap.py FSX_PERMISSIONS: shared scratch with the sticky bit, datasets read-only.
  mkdir -p /fsx/datasets /fsx/checkpoints /fsx/output /fsx/neuron-cache
  chmod 1777 /fsx /fsx/checkpoints /fsx/output /fsx/neuron-cache
  chown root:root /fsx/datasets && chmod 0755 /fsx/datasets
else
  echo "warning: /fsx is not mounted; jobs fall back to S3" >&2
fi

# EFA for NCCL and the Neuron collectives; jobs inherit it from the submitting shell.
cat > /etc/profile.d/ml-estate-efa.sh <<'ENV'
export FI_PROVIDER=efa
export FI_EFA_USE_DEVICE_RDMA=1
export FI_EFA_FORK_SAFE=1
ENV

# The example jobs and the plan's layout (training.parallelism), where the sbatch scripts read them, as on PCS.
mkdir -p /opt/ml-estate/examples
cp "$HERE"/examples/* /opt/ml-estate/examples/ 2>/dev/null || true
chmod 755 /opt/ml-estate/examples/*
if [ -f "$HERE/layout.json" ]; then install -m 0644 "$HERE/layout.json" /opt/ml-estate/layout.json; fi

# The plan's pinned training stack in /opt/ml-venv, on the nodes that run jobs (those with accelerators), as the
# PCS node image bakes it. HyperPod's AMI is not ours to bake; a failed install or check fails this node's
# creation with the step's name in /var/log/ml-estate-lifecycle.log, not the first job.
if [ -f "$HERE/install-framework.sh" ] && { compgen -G '/dev/nvidia[0-9]*' || compgen -G '/dev/neuron[0-9]*'; } >/dev/null; then
  bash "$HERE/install-framework.sh"
fi

# Slurm is HyperPod's: show what this node sees.
command -v sinfo && sinfo || true
