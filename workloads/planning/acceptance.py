"""What proves a cluster after `cdk deploy`: the acceptance job (a collective over EFA on every node, its bus bandwidth
beside the figure the type's EFA allows) and the calibration job (the shipped trainer for a few steps on the plan's
layout, its tokens per second and MFU as JSON). The TrainStack prints both command lines and the plan names them;
the scripts are examples/slurm/acceptance-*.sbatch, shipped on the nodes beside the training scripts.
"""

from __future__ import annotations

import shlex

from ..catalog import InstanceType, devices
from . import layout
from .train_commands import EXAMPLES_ON_NODE

# Below this share of the node's EFA line rate the acceptance job fails. A choice, not a published limit: a healthy
# multi-node all-reduce reaches roughly half of it or more at 1 GiB (AWS's nccom-test example, two trn1.32xlarge:
# 47 GB/s of 100 - tools/neuron-sys-tools/nccom-test.rst in aws-neuron/aws-neuron-sdk; four p4d: 29.6 GB/s of 50 in
# https://github.com/NVIDIA/nccl/issues/527), while a fall back to TCP sockets or a node with missing EFA devices
# lands far below. `--min-fraction` on the job's line changes it.
MIN_FRACTION = 0.4
CALIBRATION_STEPS = 50  # enough steps past the warm-up for a stable rate, a few minutes on the planned layout
CALIBRATION_DIR = layout.FSX_MOUNT + "/checkpoints/calibration"  # the FSx link exports it to checkpoints/calibration/


def acceptance_script(accelerator_kind: str | None) -> str:
    return "acceptance-trainium.sbatch" if accelerator_kind == "trainium" else "acceptance-gpu.sbatch"


def expected_busbw_gbs(itype: InstanceType) -> float:
    """The bus bandwidth a multi-node all-reduce can reach: the node's EFA line rate (catalog network_gbps, from the
    type's sources) in GB/s. nccl-tests defines bus bandwidth so that it compares with the hardware's peak whatever
    the rank count (NVIDIA/nccl-tests doc/PERFORMANCE.md); across nodes that peak is the network's."""
    return itype.network_gbps / 8


def acceptance_submit(*, workload: str, nodes: int, itype: InstanceType, accelerator_kind: str | None) -> str:
    """The acceptance job on every node of the cluster, one task per GPU or NeuronCore."""
    per_node, _ = devices(itype)
    command = ["sbatch", f"--job-name={workload}-acceptance", f"--nodes={nodes}", f"--ntasks-per-node={per_node}",
               f"{EXAMPLES_ON_NODE}/{acceptance_script(accelerator_kind)}",
               "--expected-gbs", f"{expected_busbw_gbs(itype):g}", "--min-fraction", f"{MIN_FRACTION:g}",
               "--instance-type", itype.name]
    return f"cd {layout.FSX_MOUNT} && {shlex.join(command)}"


def calibration_submit(*, workload: str, nodes: int, itype: InstanceType, accelerator_kind: str | None,
                       precision: str = "", speed: tuple[str, ...] = ()) -> str:
    """The shipped trainer for CALIBRATION_STEPS on the plan's layout and nodes (the training script, so the same
    environment), at the plan's precision and compiler (`speed`), writing its measured rate where the FSx link exports
    it to the bucket; its MFU over the dense peak of that precision, as the plan's is. Random tokens: the rate does
    not depend on the data, and the run needs no prepare step."""
    from ..catalog import load_utilisation
    from .estimates import peak_tflops
    from .train_commands import sbatch_script

    assert itype.peak_tflops and itype.accelerator
    per_node, _ = devices(itype)
    peak = (peak_tflops(itype, precision, load_utilisation()) if precision else None) or itype.peak_tflops
    result = f"{CALIBRATION_DIR}/{workload}.json"
    command = ["sbatch", f"--job-name={workload}-calibrate", f"--nodes={nodes}", "--no-requeue",
               f"{EXAMPLES_ON_NODE}/{sbatch_script(accelerator_kind)}",
               "--steps", str(CALIBRATION_STEPS), *speed, "--calibrate-output", result,
               "--peak-tflops", f"{peak / per_node:g}"]
    return f"cd {layout.FSX_MOUNT} && {shlex.join(command)}"
