"""How a deep-learning model is spread over the planned cluster: data, tensor and pipeline degrees and sharding.

The seeds name three modes (data, tensor and pipeline parallel) plus sharded data parallel. The choice is the
simplest layout whose memory per accelerator fits, in this order:
1. data parallel (PyTorch DDP): every rank holds the whole model state;
2. sharded data parallel (PyTorch FSDP2 `fully_shard`, ZeRO-3): model state split over every rank;
3. tensor parallel inside a node, FSDP across: also splits each layer's activations and working weights;
4. pipeline parallel across nodes on top: splits the layers' stored activations.
A layout that still does not fit is refused, naming the fields that would change it.

Memory per rank, in bytes (assumptions stated in the plan):
- model state: 16 per parameter for bf16 mixed precision with AdamW (bf16 weights and grads, fp32 master
  weights and two moments: ZeRO, Rajbhandari et al. 2020, section 3.1), divided by the ranks it is sharded over;
- while a layer computes under FSDP: its bf16 weights and grads unsharded (4 per parameter of one layer);
- activations with activation checkpointing, one sequence per rank: each layer's input kept
  (2 x sequence x hidden per layer) plus one layer's full activations while it recomputes (34 x sequence x
  hidden bytes: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", eq. 1,
  without the attention-score term that fused attention never stores); tensor parallel divides both, pipeline
  parallel divides the layers each rank keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import InstanceType, devices

STATE_BYTES_PER_PARAM = 16
WORKING_BYTES_PER_LAYER_PARAM = 4
LAYER_ACTIVATION_BYTES = 34  # per token and hidden unit
SEQUENCE = 4096  # tokens per training sequence, one sequence per rank per micro-step
# Model state, working weights and activations fill at most this share of a rank's memory; the rest is the
# framework, communication buffers and fragmentation.
MEMORY_FRACTION = 0.85
@dataclass(frozen=True)
class Parallelism:
    data: int
    tensor: int
    pipeline: int
    sharding: str  # "none" (DDP, every rank holds the whole state) | "full" (FSDP2 fully_shard over data ranks)
    ranks: int  # data x tensor x pipeline: one process per GPU or NeuronCore
    ranks_per_node: int
    gib_per_rank: float  # model state + working weights + activations, as estimated
    rank_memory_gib: float  # what each rank has
    layers: int
    hidden: int
    heads: int
    sequence: int
    reason: str


def _gib_per_rank(params: float, layers: int, hidden: int, *, shards: int, tensor: int, pipeline: int,
                  sharded: bool) -> float:
    state = params * STATE_BYTES_PER_PARAM / (shards if sharded else tensor * pipeline)
    working = params / layers * WORKING_BYTES_PER_LAYER_PARAM / tensor if sharded else 0.0
    kept_layers = -(-layers // pipeline)
    activations = (2 * SEQUENCE * hidden * kept_layers + LAYER_ACTIVATION_BYTES * SEQUENCE * hidden) / tensor
    return (state + working + activations) / 2**30


def choose(*, parameters_billion: float, layers: int, hidden: int, heads: int, itype: InstanceType,
           nodes: int) -> Parallelism | None:
    """The simplest layout that fits, or None when none does on this many nodes of this type."""
    per_node, rank_gib = devices(itype)  # one rank per GPU or (logical) NeuronCore
    ranks = per_node * nodes
    budget = rank_gib * MEMORY_FRACTION
    params = parameters_billion * 1e9

    def layout(tensor: int, pipeline: int, sharded: bool, reason: str) -> Parallelism | None:
        need = _gib_per_rank(params, layers, hidden, shards=ranks, tensor=tensor, pipeline=pipeline, sharded=sharded)
        if need > budget:
            return None
        return Parallelism(data=ranks // (tensor * pipeline), tensor=tensor, pipeline=pipeline,
                           sharding="full" if sharded else "none", ranks=ranks, ranks_per_node=per_node,
                           gib_per_rank=round(need, 1), rank_memory_gib=round(rank_gib, 1), layers=layers,
                           hidden=hidden, heads=heads, sequence=SEQUENCE, reason=reason)

    found = layout(1, 1, False, "the whole model state fits on every rank: plain data parallel (DDP)") \
        or layout(1, 1, True, "the model state fits only sharded over every rank: FSDP2 full shard")
    if found:
        return found
    # Tensor parallel stays inside a node (NVLink, NeuronLink); its degree must divide the heads.
    degrees = [t for t in (2, 4, 8, 16, 32, 64) if t <= per_node and per_node % t == 0 and heads % t == 0]
    for t in degrees:
        found = layout(t, 1, True, f"activations need splitting: tensor parallel {t} inside each node, FSDP2 "
                                   "across")
        if found:
            return found
    for p in (p for p in range(2, nodes + 1) if nodes % p == 0 and p <= layers):
        for t in degrees or [1]:
            found = layout(t, p, True, f"layers' activations need splitting too: pipeline parallel {p} across "
                                       f"nodes, tensor parallel {t} inside, FSDP2 over the rest")
            if found:
                return found
    return None
