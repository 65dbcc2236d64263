"""User data for cluster nodes: mount /fsx (and /home), set the EFA and NCCL or Neuron environment.

AWS PCS merges its own user data with ours, so ours is MIME multi-part; a text/x-shellscript
part runs after the node registers with PCS and before slurmd starts (PCS user guide,
"Working with Amazon EC2 user data"). Mount options are the FSx for Lustre user guide's.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Fn

BOUNDARY = "==ML-ESTATE-BOUNDARY=="
EFS_OPTIONS = "nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport,_netdev"
# Where the EFA installer puts the AWS OFI NCCL plugin on Ubuntu (multiarch directory first) and libfabric.
OFI_NCCL_DIRS = ("/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu", "/opt/amazon/ofi-nccl/lib")
EFA_LIB = "/opt/amazon/efa/lib"
# Jobs inherit these from the submitting shell (sbatch exports the environment by default).
EFA = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_FORK_SAFE": "1"}
ENVIRONMENT = {
    "nvidia-gpu": {"NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": "^docker,lo,veth"},
    "trainium": {"MALLOC_ARENA_MAX": "64"},
}
# PyPI's torch brings its own NCCL, which finds the AWS OFI NCCL plugin only on the library path. With NCCL_NET set,
# NCCL fails when the plugin's network is missing instead of falling back to TCP sockets silently (NCCL environment
# variables: NCCL_NET). Confirm with NCCL_DEBUG=INFO: the job log shows "NET/OFI" and "Using network AWS Libfabric".
OFI_NCCL = {"LD_LIBRARY_PATH": ":".join((*OFI_NCCL_DIRS, EFA_LIB)) + "${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}",
            "NCCL_NET": "'AWS Libfabric'"}


@dataclass(frozen=True)
class Mounts:
    lustre_dns: str | None = None  # tokens from the DataStack
    lustre_mount_name: str | None = None
    home_dns: str | None = None  # <fs-id>.efs.<region>.amazonaws.com


# /fsx and /fsx/checkpoints, /fsx/output (exported to S3) are shared scratch with the sticky bit: anyone
# writes, only the owner deletes. /fsx/datasets (imported, never exported) is read-only to users.
FSX_PERMISSIONS = ("mkdir -p /fsx/datasets /fsx/checkpoints /fsx/output /fsx/neuron-cache",
                   "chmod 1777 /fsx /fsx/checkpoints /fsx/output /fsx/neuron-cache",
                   "chown root:root /fsx/datasets && chmod 0755 /fsx/datasets")


LAYOUT_ON_NODE = "/opt/ml-estate/layout.json"  # where the sbatch examples read the plan's layout


def node_script(*, accelerator_kind: str | None, mounts: Mounts, layout: str | None = None, efa: bool = False) -> str:
    """`layout`: the plan's training.parallelism as JSON, for the training jobs on this node. `efa`: the nodes
    have EFA, so jobs use it (and GPU jobs refuse to run without the OFI NCCL plugin)."""
    lines = ["#!/bin/bash", "set -euo pipefail"]
    if mounts.lustre_dns:
        source = f"{mounts.lustre_dns}@tcp:/{mounts.lustre_mount_name}"
        lines += [
            "# /fsx: FSx for Lustre, linked to the dataset bucket",
            "mkdir -p /fsx",
            # Ubuntu 24.04 has no network.service: wait for the network-online target (systemd.special).
            f"grep -q ' /fsx ' /etc/fstab || echo '{source} /fsx lustre defaults,relatime,flock,_netdev,"
            "x-systemd.automount,x-systemd.requires=network-online.target 0 0' >> /etc/fstab",
            f"mountpoint -q /fsx || mount -t lustre -o relatime,flock {source} /fsx",
            *FSX_PERMISSIONS,
        ]
    if mounts.home_dns:
        # NFSv4.1 with the EFS user guide's recommended options (no efs-utils needed on Ubuntu).
        lines += [
            "# /home: EFS shared home directories",
            f"grep -q ' /home ' /etc/fstab || echo '{mounts.home_dns}:/ /home nfs4 {EFS_OPTIONS} 0 0' >> /etc/fstab",
            "mountpoint -q /home || mount /home",
        ]
    if layout:
        lines += ["# The plan's layout: how train.py spreads the model (training.parallelism)",
                  f"mkdir -p {LAYOUT_ON_NODE.rsplit('/', 1)[0]}", f"cat > {LAYOUT_ON_NODE} <<'EOF'", layout, "EOF"]
    env = {**(EFA if efa else {}), **ENVIRONMENT.get(accelerator_kind or "", {}),
           **(OFI_NCCL if efa and accelerator_kind == "nvidia-gpu" else {})}
    if env:
        lines.append("cat > /etc/profile.d/ml-estate-efa.sh <<'EOF'")
        lines += [f"export {k}={v}" for k, v in env.items()]
        lines.append("EOF")
    return "\n".join(lines) + "\n"


def mime_user_data(script: str) -> str:
    """Base64 MIME multi-part user data holding one shell-script part (tokens allowed in `script`)."""
    parts = [
        "MIME-Version: 1.0",
        f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"',
        "",
        f"--{BOUNDARY}",
        'Content-Type: text/x-shellscript; charset="us-ascii"',
        "",
        script,
        f"--{BOUNDARY}--",
        "",
    ]
    return Fn.base64("\n".join(parts))
