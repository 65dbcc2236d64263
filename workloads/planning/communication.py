"""What one optimizer step of a layout spends communicating, beside its compute, and how much of it compute hides.

Each collective is costed by NCCL's bus-bandwidth model (ring algorithms; NVIDIA/nccl-tests doc/PERFORMANCE.md,
https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md): an all-gather or a reduce-scatter of S bytes
over n ranks moves (n - 1) / n x S through each rank's slowest link, an all-reduce twice that, at the link's
bandwidth in one direction. Inside a node the link is the device's own NVLink/NeuronLink (catalog utilisation.yaml
intra_node_gb_s_per_device). A ring across nodes crosses each node boundary once and NCCL runs one ring per NIC, so
a group with k ranks on each node gets k / (ranks per node) of the node's EFA (catalog network_gbps): FSDP over all
ranks gets the whole node's, tensor parallel t leaves each of the t data groups 1/t, a replica group of one rank a
node 1/(ranks per node).
Latency and the links' achieved fraction of their peak are left out: the figures are a floor.

What the shipped trainer (examples/slurm/train.py) sends per optimizer step of m micro-steps:
- FSDP2 (sharding full, or hybrid within its shard group): every micro-step gathers each block's bf16 weights twice
  (forward, and backward after resharding: reshard_after_forward's default), 2 bytes per parameter of the rank's
  tensor slice; gradients are reduce-scattered every micro-step (the trainer keeps gradient sync on, as torchtitan
  does: with it off FSDP2 would hold every parameter's unsharded gradient; train.py micro_step), in bf16 under bf16 or
  fp8 compute (examples/slurm/speed.py mixed_precision: reduce_dtype bf16 unless --reduce-dtype fp32; fp32 under
  fp16), 2 bytes per parameter. Hybrid (HSDP) then all-reduces each shard's gradients across the replicas (the same
  dtype) once, after the last micro-step (set_requires_all_reduce: the shards accumulate between).
- DDP (sharding none): one fp32 all-reduce of the gradients after the last micro-step (no_sync before it).
- tensor parallel t: Megatron's layout, two all-reduces of the block's activations forward and two backward
  (Shoeybi et al. 2019, https://arxiv.org/abs/1909.08053, section 3), two more where the forward is recomputed; each
  of micro-batch x sequence x hidden bf16 values.

Overlap, as FSDP2 and DDP schedule it (assumed, not measured here): the all-gathers are prefetched behind the
compute of every micro-step, so only what exceeds the step's compute is exposed; a gradient reduction runs behind
its micro-step's backward (two thirds of its compute: 4N of 6N FLOPs per token: FSDP2's every micro-step, DDP's the
last one's), so what exceeds that is exposed. The gathers and reductions share the same links, so at the least
whatever their sum exceeds the step's compute by is exposed: communication is never hidden behind less compute
than it takes. Tensor parallel's all-reduces sit on the critical path (DTensor runs them synchronously): always exposed.
The published utilisation rows were measured with their own communication overlapped; what this adds is only what
the planned layout cannot hide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..catalog import InstanceType, Interconnect, devices, load_utilisation

PARAM_GATHER_BYTES = 2  # bf16 weights gathered (MixedPrecisionPolicy param_dtype)
GRAD_REDUCE_BYTES = 4  # fp32 gradients reduced: DDP's buckets (fp32 master weights), FSDP2 under fp16
BF16_GRAD_REDUCE_BYTES = 2  # FSDP2's reduce_dtype under bf16 or fp8 compute (examples/slurm/speed.py)
ACTIVATION_BYTES = 2  # bf16 activations all-reduced by tensor parallel
TP_ALL_REDUCES = 4  # per block and micro-step: two forward, two backward
TP_RECOMPUTE_ALL_REDUCES = 2  # the recomputed forward's
BACKWARD_SHARE = 2 / 3  # of a micro-step's compute: 4N of 6N FLOPs per token


class Layout(Protocol):
    """What this module reads of a layout (parallelism.Parallelism, which imports this module to choose HSDP)."""

    data: int
    tensor: int
    sharding: str
    shard_group: int
    ranks_per_node: int
    global_batch: int
    micro_batch: int
    layers: int
    hidden: int
    sequence: int
    recompute: bool
    precision: str


def grad_bytes(spread: Layout) -> int:
    """Bytes per parameter a gradient reduction of `spread` moves, as the shipped trainer reduces."""
    return GRAD_REDUCE_BYTES if spread.sharding == "none" or spread.precision in ("fp16", "fp32") \
        else BF16_GRAD_REDUCE_BYTES


@dataclass(frozen=True)
class Communication:
    """One training step's collectives: seconds of each kind, what is exposed, and the bytes over EFA."""
    compute_s: float  # one optimizer step's compute at the estimate's utilisation
    gather_s: float  # FSDP all-gathers over the step (0 for DDP)
    reduce_s: float  # gradient reduce-scatters / all-reduces over the step (FSDP2: every micro-step; DDP: the last)
    tensor_s: float  # tensor parallel's all-reduces over the step
    exposed_s: float  # what the step waits for beyond its compute
    inter_node_gb: float  # GB each node sends over EFA per step
    links: str  # which link each collective takes, in words

    @property
    def total_s(self) -> float:
        return self.gather_s + self.reduce_s + self.tensor_s

    @property
    def step_s(self) -> float:
        return self.compute_s + self.exposed_s

    @property
    def factor(self) -> float:
        """Wall-clock over compute: what the estimate's hours are multiplied by."""
        return self.step_s / self.compute_s if self.compute_s else 1.0

    @property
    def hidden(self) -> bool:
        return self.exposed_s <= 0.005 * self.compute_s  # within half a percent: hidden

    def line(self) -> str:
        """The plan's words: communication per step, over which links, and whether compute hides it."""
        parts = []
        if self.gather_s:
            parts.append(f"FSDP all-gathers {self.gather_s:,.2f} s")
        if self.reduce_s:
            parts.append(f"gradient reduction {self.reduce_s:,.2f} s")
        if self.tensor_s:
            parts.append(f"tensor-parallel all-reduces {self.tensor_s:,.2f} s")
        what = ", ".join(parts) or "none"
        verdict = "hidden behind compute" if self.hidden else \
            f"{self.exposed_s:,.2f} s exposed (+{self.factor - 1:.0%} wall-clock)"
        efa = f"; {self.inter_node_gb:,.0f} GB a node over EFA" if self.inter_node_gb else ""
        return (f"communication {self.total_s:,.2f} s a step ({what}; {self.links}{efa}) against "
                f"{self.compute_s:,.2f} s of compute: {verdict}")


def intra_node(itype: InstanceType) -> Interconnect | None:
    assert itype.accelerator
    return load_utilisation().intra_node.get(itype.accelerator.model)


def link_gb_s(itype: InstanceType) -> tuple[float, float | None]:
    """(a node's EFA GB/s a direction, one rank's device link GB/s inside a node or None where none is recorded)."""
    assert itype.accelerator
    per_node, _ = devices(itype)
    link = intra_node(itype)
    # A chip's link is shared by its (logical) NeuronCores: each rank gets its share.
    inside = link.gb_s * itype.accelerator.count / per_node if link else None
    return itype.network_gbps / 8, inside


def _ring(nbytes: float, ranks: int, gb_s: float, *, all_reduce: bool = False) -> float:
    """Seconds for one ring collective of `nbytes` over `ranks` at `gb_s` a direction (bus bandwidth)."""
    if ranks <= 1:
        return 0.0
    return (2 if all_reduce else 1) * (ranks - 1) / ranks * nbytes / (gb_s * 1e9)


@dataclass(frozen=True)
class _Group:
    """One kind of process group: its size, its ranks on one node, and the bus bandwidth each of its rings gets."""

    ranks: int
    per_node: int  # of its ranks on one node
    spans_nodes: bool
    gb_s: float

    def efa_bytes(self, nbytes: float, node_ranks: int, *, all_reduce: bool = False) -> float:
        """Bytes one node sends over EFA for one such collective run by every group on the node at once: each ring
        crosses a node boundary once, (n - 1) / n of the data (twice for an all-reduce)."""
        if not self.spans_nodes or self.ranks <= 1:
            return 0.0
        concurrent = node_ranks // self.per_node
        return concurrent * (2 if all_reduce else 1) * (self.ranks - 1) / self.ranks * nbytes


def _group(ranks: int, stride: int, node_ranks: int, efa: float, inside: float) -> _Group:
    """A group of `ranks` ranks `stride` apart (ranks are numbered node by node). Inside one node it runs at the device
    link; across nodes each ring has one boundary crossing per node (NCCL runs one ring per NIC), so the node's EFA is
    shared by the groups the node holds: node_ranks / per_node of them."""
    span = ranks * stride
    if span <= node_ranks:
        return _Group(ranks, ranks, False, inside)
    per_node = max(1, node_ranks // stride)
    return _Group(ranks, per_node, True, min(inside, efa * per_node / node_ranks))


def step(spread: Layout, itype: InstanceType, *, parameters_billion: float, compute_s: float) -> Communication:
    """The communication of one optimizer step of `spread` on `itype`, against `compute_s` of compute."""
    node_ranks = spread.ranks_per_node
    efa, inside = link_gb_s(itype)
    inside = inside or efa / node_ranks  # no recorded device link: no faster than the network (said in the line)
    t = spread.tensor
    params = parameters_billion * 1e9 / t  # each tensor rank's slice
    micro_steps = max(1, spread.global_batch // max(1, spread.data * spread.micro_batch))
    shard = (spread.shard_group or spread.data) if spread.sharding != "none" else 1
    replicas = spread.data // shard
    # The mesh is (replicate, shard, tensor), tensor innermost: a shard group's ranks are t apart, a replica group's
    # shard x t apart.
    shard_g = _group(shard, t, node_ranks, efa, inside)
    replica_g = _group(replicas, shard * t, node_ranks, efa, inside)
    gather = scatter = across = efa_bytes = 0.0
    if shard > 1:  # FSDP2: gathers and a reduce-scatter every micro-step
        gather = 2 * micro_steps * _ring(params * PARAM_GATHER_BYTES, shard, shard_g.gb_s)
        scatter = _ring(params * grad_bytes(spread), shard, shard_g.gb_s)
        efa_bytes += 2 * micro_steps * shard_g.efa_bytes(params * PARAM_GATHER_BYTES, node_ranks)
        efa_bytes += micro_steps * shard_g.efa_bytes(params * grad_bytes(spread), node_ranks)
    if replicas > 1:  # DDP's all-reduce, or HSDP's across the replicas of each shard: once, after the last micro-step
        piece = params * grad_bytes(spread) / shard
        across = _ring(piece, replicas, replica_g.gb_s, all_reduce=True)
        efa_bytes += replica_g.efa_bytes(piece, node_ranks, all_reduce=True)
    reduce = micro_steps * scatter + across
    tensor = 0.0
    if t > 1:
        per_block = TP_ALL_REDUCES + (TP_RECOMPUTE_ALL_REDUCES if spread.recompute else 0)
        activation = spread.micro_batch * spread.sequence * spread.hidden * ACTIVATION_BYTES
        tensor = micro_steps * spread.layers * per_block * _ring(activation, t, inside, all_reduce=True)
    backward = compute_s / micro_steps * BACKWARD_SHARE  # one micro-step's backward, what a reduction hides behind
    each = max(0.0, gather - compute_s) + (micro_steps - 1) * max(0.0, scatter - backward) \
        + max(0.0, scatter + across - backward)
    exposed = tensor + max(each, gather + reduce - compute_s)  # one set of links carries them all
    return Communication(compute_s=compute_s, gather_s=gather, reduce_s=reduce, tensor_s=tensor, exposed_s=exposed,
                         inter_node_gb=efa_bytes / 1e9,
                         links=_links(spread, itype, shard, replicas, shard_g, replica_g))


def _links(spread: Layout, itype: InstanceType, shard: int, replicas: int, shard_g: _Group,
           replica_g: _Group) -> str:
    link = intra_node(itype)
    name = "no device link recorded: taken as slow as the node's EFA share" if link is None else \
        link.what + (f" [{link.source}, {link.stand_in}'s]" if link.stand_in else f" [{link.source}]")
    where = []
    if shard > 1:
        where.append(f"FSDP over {shard:,} ranks " + (f"across nodes at {shard_g.gb_s:,.0f} GB/s"
                                                      if shard_g.spans_nodes else "inside a node"))
    if replicas > 1:
        what = "DDP all-reduce" if spread.sharding == "none" else f"{replicas:,} replicas' all-reduce"
        where.append(f"{what} " + (f"across nodes at {replica_g.gb_s:,.0f} GB/s" if replica_g.spans_nodes
                                   else "inside a node"))
    if spread.tensor > 1:
        where.append(f"tensor parallel {spread.tensor} inside a node")
    return (", ".join(where) + f"; inside a node {name}; between nodes {itype.network_gbps:,.0f} Gbps of EFA a node "
            "shared by its rings")
