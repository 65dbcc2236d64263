"""User data for cluster nodes: mount /fsx (and /home), set the EFA and NCCL or Neuron environment.

AWS PCS merges its own user data with ours, so ours is MIME multi-part; a text/x-shellscript
part runs after the node registers with PCS and before slurmd starts (PCS user guide,
"Working with Amazon EC2 user data"). Mount options are the FSx for Lustre user guide's.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Fn

from .node_metrics import boot_lines as metrics_boot_lines

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
ENV_ON_NODE = "/etc/profile.d/ml-estate-efa.sh"  # jobs inherit it from the submitting shell
# A shared file system that does not mount at once (FSx still creating its interfaces, a slow network) is retried
# with growing waits, about 6 minutes in all, then given up on: the node stays out of Slurm instead.
MOUNT_ATTEMPTS = 6
MOUNT_BACKOFF_S = 5  # wait after attempt n: n * n * 5 s (5, 20, 45, 80, 125, 180)
# slurmd waits for the shared file systems: a drop-in of its systemd unit. The user data's shell part runs after the
# node registers with PCS and before slurmd starts (PCS user guide, "Working with Amazon EC2 user data"), so the
# drop-in is in place when slurmd starts; a node whose mount failed never runs slurmd and so never takes a job.
SLURMD_DROPIN = "/etc/systemd/system/slurmd.service.d/ml-estate-mounts.conf"
# The node's health check (examples/slurm/node-health.sh, shipped in the image): the plan's expected devices in its
# conf; at boot the full check runs, and a failing node records why and never starts slurmd. Before each job the
# cluster's Slurm Prolog runs the quick check (PCS supports Prolog among its cluster custom settings; HealthCheckProgram
# is not among them: AWS SDK reference for PCS SlurmCustomSetting parameterName, "For clusters: Prolog, Epilog,
# SelectTypeParameters, AccountingStorageEnforce",
# https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/pcs/aws.sdk.kotlin.services.pcs.model/-slurm-custom-setting/parameter-name.html).
HEALTH_SCRIPT = "/opt/ml-estate/examples/node-health.sh"
HEALTH_CONF = "/opt/ml-estate/node-health.conf"
UNHEALTHY = "/var/lib/ml-estate/unhealthy"  # the failed check's reason; its presence keeps slurmd from starting


@dataclass(frozen=True)
class Metrics:
    cluster: str  # the Cluster dimension's value the node publishes with (node_metrics.py): the TrainStack's name
    region: str  # where Neuron's monitor publishes (the agent finds its region itself on EC2)
    training_log_group: str | None = None  # where the agent ships the trainer's metrics file (a token allowed)


@dataclass(frozen=True)
class Health:
    kind: str  # nvidia-gpu | trainium
    devices: int  # GPUs, or Neuron devices (chips), as nvidia-smi -L and neuron-ls count them


def node_script(*, accelerator_kind: str | None, mounts: Mounts, layout: str | None = None, efa: bool = False,
                health: Health | None = None, metrics: Metrics | None = None) -> str:
    """`layout`: the plan's training.parallelism as JSON, for the training jobs on this node. `efa`: the nodes
    have EFA, so jobs use it (and GPU jobs refuse to run without the OFI NCCL plugin). `health`: the compute nodes'
    expected devices; the node checks itself before slurmd starts (HEALTH_SCRIPT --full). `metrics`: the node
    starts the CloudWatch agent (and on Trainium Neuron's monitor) for its cluster's dashboard; a failure there is
    a warning, never a node out of service.

    Order matters: what the jobs read (layout, environment) is written first, so no mount failure can leave a
    node that runs jobs without it; the mounts are retried; slurmd starts only with every mount in place.
    ROOT (empty on a node) lets the tests run the script in a sandbox."""
    lines = ["#!/bin/bash", "set -euo pipefail", 'R="${ML_ESTATE_ROOT:-}"  # the file system root; empty on a node']
    if layout:
        lines += ["# The plan's layout: how train.py spreads the model (training.parallelism)",
                  f'mkdir -p "$R{LAYOUT_ON_NODE.rsplit("/", 1)[0]}"', f"cat > \"$R{LAYOUT_ON_NODE}\" <<'EOF'", layout,
                  "EOF"]
    env = {**(EFA if efa else {}), **ENVIRONMENT.get(accelerator_kind or "", {}),
           **(OFI_NCCL if efa and accelerator_kind == "nvidia-gpu" else {})}
    if env:
        lines += [f'mkdir -p "$R{ENV_ON_NODE.rsplit("/", 1)[0]}"', f"cat > \"$R{ENV_ON_NODE}\" <<'EOF'"]
        lines += [f"export {k}={v}" for k, v in env.items()]
        lines.append("EOF")
    if health:
        lines += ["# The node's health (node-health.sh): the plan's devices, then the full check; a failure keeps slurmd off",
                  f'mkdir -p "$R{HEALTH_CONF.rsplit("/", 1)[0]}" "$R{UNHEALTHY.rsplit("/", 1)[0]}"',
                  f"printf 'KIND=%s\\nDEVICES=%s\\n' {health.kind} {health.devices} > \"$R{HEALTH_CONF}\"",
                  f'if ! verdict=$(ML_ESTATE_ROOT="$R" bash "$R{HEALTH_SCRIPT}" --full); then',
                  f'  echo "$verdict" > "$R{UNHEALTHY}"',
                  '  echo "error: $verdict; slurmd will not start, so this node takes no jobs" >&2',
                  "fi"]
    if metrics:
        lines += metrics_boot_lines(cluster=metrics.cluster, accelerator_kind=accelerator_kind, region=metrics.region,
                                    training_log_group=metrics.training_log_group)
    required = []  # mount points slurmd needs
    if mounts.lustre_dns or mounts.home_dns:
        lines += [
            "mount_with_retry() {  # DIR COMMAND...: bounded retries with growing waits; fails if DIR is not mounted",
            '  local dir=$1 attempt',
            "  shift",
            f"  for attempt in $(seq 1 {MOUNT_ATTEMPTS}); do",
            '    mountpoint -q "$dir" && return 0',
            '    "$@" && return 0',
            f'    echo "mount of $dir failed (attempt $attempt of {MOUNT_ATTEMPTS})" >&2',
            f"    sleep $((attempt * attempt * {MOUNT_BACKOFF_S}))",
            "  done",
            '  mountpoint -q "$dir"',
            "}",
        ]
    if mounts.lustre_dns:
        source = f"{mounts.lustre_dns}@tcp:/{mounts.lustre_mount_name}"
        required.append("/fsx")
        lines += [
            "# /fsx: FSx for Lustre, linked to the dataset bucket",
            'mkdir -p "$R/fsx"',
            # Ubuntu 24.04 has no network.service: wait for the network-online target (systemd.special).
            f"grep -q ' /fsx ' \"$R/etc/fstab\" || echo '{source} /fsx lustre defaults,relatime,flock,_netdev,"
            "x-systemd.automount,x-systemd.requires=network-online.target 0 0' >> \"$R/etc/fstab\"",
            f'if mount_with_retry "$R/fsx" mount -t lustre -o relatime,flock {source} "$R/fsx"; then',
            *(f"  {line}" for line in _rooted(FSX_PERMISSIONS)),
            "else",
            '  echo "error: /fsx is not mounted; slurmd will not start, so this node takes no jobs" >&2',
            "fi",
        ]
    if mounts.home_dns:
        # NFSv4.1 with the EFS user guide's recommended options (no efs-utils needed on Ubuntu).
        required.append("/home")
        lines += [
            "# /home: EFS shared home directories",
            f"grep -q ' /home ' \"$R/etc/fstab\" || echo '{mounts.home_dns}:/ /home nfs4 {EFS_OPTIONS} 0 0' "
            ">> \"$R/etc/fstab\"",
            f'mount_with_retry "$R/home" mount -t nfs4 -o {EFS_OPTIONS} {mounts.home_dns}:/ "$R/home" || '
            'echo "error: /home is not mounted; slurmd will not start, so this node takes no jobs" >&2',
        ]
    if required or health:
        # systemd mounts them before slurmd (or fails it), and slurmd checks them itself before it starts.
        lines += [
            "# slurmd starts only with the shared file systems mounted" + (" and a healthy node" if health else ""),
            f'mkdir -p "$R{SLURMD_DROPIN.rsplit("/", 1)[0]}"',
            f"cat > \"$R{SLURMD_DROPIN}\" <<'EOF'",
            *(["[Unit]", f"RequiresMountsFor={' '.join(required)}"] if required else []),
            "[Service]",
            *(f"ExecStartPre=/usr/bin/mountpoint -q {m}" for m in required),
            *([f"ExecStartPre=/usr/bin/test ! -e {UNHEALTHY}"] if health else []),
            "EOF",
            "systemctl daemon-reload",
        ]
    return "\n".join(lines) + "\n"


def _rooted(commands: tuple[str, ...]) -> list[str]:
    """FSX_PERMISSIONS with each /fsx path under the sandbox root."""
    return [c.replace(" /fsx", ' "$R"/fsx') for c in commands]


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
