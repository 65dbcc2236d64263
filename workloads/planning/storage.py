"""FSx for Lustre sizing: capacity from the dataset, throughput from the cluster's need.

PERSISTENT_2 rules (AWS FSx for Lustre user guide, "Managing storage capacity" and
"Throughput"): storage is 1200 GiB or a multiple of 2400 GiB; per-unit throughput is
125, 250, 500 or 1000 MB/s per TiB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FIRST_STEP_GIB = 1200
STEP_GIB = 2400
PER_UNIT_MB_S = (125, 250, 500, 1000)
# Checkpoints hold what examples/slurm/train.py's DCP state is (get_state_dict of model and optimizer): the fp32
# weights and AdamW's two fp32 moments, 12 B per parameter; gradients are not saved.
CHECKPOINT_BYTES_PER_PARAM = 12
CHECKPOINT_WRITE_SECONDS = 300  # a checkpoint should not stall training for more than 5 minutes
CHECKPOINTS_KEPT = 2
# /fsx/output holds the trained model in bf16 (2 B per parameter); nothing else of the bucket is linked
# (workloads.planning.layout.FSX_LINKS): models served, inference data and job code take no file system space.
OUTPUT_BYTES_PER_PARAM = 2
READ_HEADROOM = 2.0  # shuffling, restarts and the first epoch's cold reads
# The prepare step's shards (/fsx/tokens/NAME, examples/slurm/prepare.py): each token id as uint16 where the vocabulary
# fits 65,536 entries, else uint32. NxD Training's copy (NAME-nxdt, nxdt_data.py) holds input_ids and labels in that
# dtype and an int8 attention mask: two ids and a byte a token.
ID_VOCAB_LIMIT = 2**16
MASK_BYTES = 1


def tokens_gib(*, tokens_billion: float, vocab: int, nxdt: bool) -> float:
    """What the tokenized dataset takes on /fsx: the shards, and NxD Training's Arrow copy where it trains."""
    id_bytes = 2 if vocab <= ID_VOCAB_LIMIT else 4
    per_token = id_bytes + ((2 * id_bytes + MASK_BYTES) if nxdt else 0)
    return tokens_billion * 1e9 * per_token / 2**30


@dataclass(frozen=True)
class FsxPlan:
    """The FSx for Lustre file system a training run needs: capacity and throughput, and why."""
    storage_capacity_gib: int
    per_unit_mb_s: int
    throughput_mb_s: float  # capacity x per-unit throughput
    read_need_mb_s: float
    checkpoint_need_mb_s: float
    why: str


def valid_capacity(gib: float) -> int:
    """The smallest valid PERSISTENT_2 capacity that holds `gib`."""
    if gib <= FIRST_STEP_GIB:
        return FIRST_STEP_GIB
    return math.ceil(gib / STEP_GIB) * STEP_GIB


def size_fsx(*, dataset_gib: float, parameters_billion: float, epochs: float, training_hours: float | None,
             token_gib: float = 0.0, token_what: str = "") -> FsxPlan:
    """Capacity for the data, its tokenized copies (token_gib: tokens_gib, named by token_what), the checkpoints kept
    and the model; throughput for the faster of reading the data and writing a checkpoint."""
    checkpoint_gib = parameters_billion * 1e9 * CHECKPOINT_BYTES_PER_PARAM / 2**30
    output_gib = parameters_billion * 1e9 * OUTPUT_BYTES_PER_PARAM / 2**30
    capacity = valid_capacity(dataset_gib + token_gib + CHECKPOINTS_KEPT * checkpoint_gib + output_gib)
    hours = training_hours or 24.0
    read_need = dataset_gib * 2**30 * epochs / (hours * 3600) / 1e6 * READ_HEADROOM
    checkpoint_need = checkpoint_gib * 2**30 / CHECKPOINT_WRITE_SECONDS / 1e6
    need = max(read_need, checkpoint_need)
    tib = capacity / 1024
    unit = next((u for u in PER_UNIT_MB_S if tib * u >= need), None)
    if unit is None:  # even 1000 MB/s/TiB is too slow: buy capacity for throughput
        unit = PER_UNIT_MB_S[-1]
        capacity = valid_capacity(need / unit * 1024)
    driver = "checkpoint writes" if checkpoint_need >= read_need else "data reads"
    tokenized = f"{token_gib:,.0f} GiB of {token_what}, " if token_gib else ""
    why = (f"{capacity:,} GiB holds {dataset_gib:,.0f} GiB of data (/fsx/datasets, imported only), {tokenized}"
           f"{CHECKPOINTS_KEPT} checkpoints of {checkpoint_gib:,.0f} GiB (/fsx/checkpoints) and the "
           f"{output_gib:,.0f} GiB model (/fsx/output), both exported to S3; {unit} MB/s/TiB covers "
           f"{need:,.0f} MB/s ({driver})")
    return FsxPlan(capacity, unit, capacity / 1024 * unit, read_need, checkpoint_need, why)
