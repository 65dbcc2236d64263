"""How a deep-learning model is spread over the planned cluster: data, tensor and pipeline degrees and sharding.

The seeds name three modes (data, tensor and pipeline parallel) plus sharded data parallel. The choice is the
simplest layout whose memory per accelerator fits, in this order:
1. data parallel (PyTorch DDP): every rank holds the whole model state;
2. sharded data parallel (PyTorch FSDP2 `fully_shard`, ZeRO-3): model state split over every rank;
3. tensor parallel inside a node, FSDP across: also splits each layer's activations and working weights;
4. pipeline parallel across nodes on top: splits the layers' stored activations.
A layout that still does not fit is refused, naming the fields that would change it.

Memory per rank, in bytes, as examples/slurm/train.py holds it (measured on an H100, 2026-11-23: the fixtures of
tests/test_parallelism.py). The peak is the larger of the forward/backward and the optimizer step:
- model state: 16 per parameter, divided by the ranks it is sharded over: fp32 weights, fp32 gradients and AdamW's
  two fp32 moments. DDP keeps its gradients in its buckets (gradient_as_bucket_view) and computes in bf16 under
  autocast; FSDP2 keeps fp32 shards and casts to bf16 per layer (MixedPrecisionPolicy) with fp32 reduction.
  (ZeRO's accounting gives the same 16: Rajbhandari et al. 2020, section 3.1.)
- forward/backward: DDP also holds autocast's bf16 copy of every weight (2 per parameter) until the forward
  ends; FSDP2 holds a gathered layer's bf16 weights and gradients (4 per parameter of one layer);
- activations with activation checkpointing, one sequence per rank: each layer's input kept
  (2 x sequence x hidden per layer) plus one layer's full activations while it recomputes (34 x sequence x
  hidden bytes: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", eq. 1,
  without the attention-score term that fused attention never stores); tensor parallel divides both, pipeline
  parallel divides the layers each rank keeps;
- the logits and the loss: 16 bytes per token and vocabulary entry (bf16 logits, their fp32 copy, log-softmax
  and its gradient); 7.8 GiB at 4096 tokens of a 128k vocabulary, more than a small model's state;
- the optimizer step: the state plus 4 per parameter of temporaries for foreach AdamW, PyTorch's default where
  no fused kernel is used (the trainer uses the fused kernel on GPUs; the plan counts the foreach peak for all).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from .catalog import InstanceType, devices

STATE_BYTES_PER_PARAM = 16
AUTOCAST_BYTES_PER_PARAM = 2  # DDP
WORKING_BYTES_PER_LAYER_PARAM = 4  # FSDP2
LAYER_ACTIVATION_BYTES = 34  # per token and hidden unit
LOGIT_BYTES = 16  # per token and vocabulary entry
STEP_BYTES_PER_PARAM = 4  # foreach AdamW's temporaries
# Model FLOPs over hardware FLOPs with every block recomputed: 6N of 8N per token (a second forward of 2N).
RECOMPUTE_EFFICIENCY = 6 / 8
SEQUENCE = 4096  # tokens per training sequence, one sequence per rank per micro-step
VOCAB = 32000  # the decoder's vocabulary (Llama 2's tokenizer), written into the layout for the trainer
# Model state, working weights and activations fill at most this share of a rank's memory; the rest is the
# framework, communication buffers and fragmentation (the allocator reserved 1.04-1.08x what tensors held in
# the H100 measurements with the fused optimizer).
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
    vocab: int
    reason: str
    # Activation checkpointing (recompute every block in backward) only where memory needs it: it costs a second
    # forward, 8N instead of 6N FLOPs per token, so the estimate's utilisation is 3/4 of the measured (no recompute).
    recompute: bool = True
    kv_heads: int = 0  # grouped-query attention, the Llama shape the trainer builds (0: as heads)
    intermediate: int = 0  # SwiGLU width (0: the trainer's Llama 3 rule)
    keep_checkpoints: int = 2  # what FSx is sized for; the trainer deletes older ones
    export_dir: str = ""  # where the trainer writes the final Hugging Face directory (FSx exports it to models/)
    shutdown_timeout_s: int = 30  # torchrun's wait after SIGTERM: the checkpoint time (TORCH_ELASTIC_SHUTDOWN_TIMEOUT)
    signal_lead_s: int = 120  # how early Slurm signals before the time limit: the shutdown time plus a step
    steps: int = 0  # the plan's tokens over the global batch (data ranks x one sequence); 0: the trainer's default

    def as_json(self) -> str:
        """The layout as train.py reads it: the nodes' layout.json, or a training job's LAYOUT_JSON."""
        return json.dumps(asdict(self), sort_keys=True)


# What the shipped trainer (examples/slurm/train.py) runs, by the node stack's device (catalog/software.yaml): DDP and
# FSDP2 (`fully_shard`) with tensor and pipeline degrees of 1. On Trn1 (device xla: Neuron 2.28's PyTorch/XLA stack)
# DDP only: FSDP2 is native PyTorch, which TorchNeuron brings to Trn2 and not to Trn1, and PyTorch/XLA's own sharding
# (NxD's ZeRO-1, tensor parallel) is not in the example.
TRAINER_SHARDING = {"cuda": ("none", "full"), "neuron": ("none", "full"), "xla": ("none",)}


def trainer_refusal(spread: Parallelism, device: str, *, what: str) -> str | None:
    """Why the shipped trainer cannot run this layout on `device`, or None when it can. `what`: the model and
    cluster in words, for the message."""
    if spread.tensor > 1 or spread.pipeline > 1:
        return (f"{what} needs tensor parallel {spread.tensor} x pipeline {spread.pipeline} ({spread.reason}); the "
                "shipped trainer runs data-parallel layouts (DDP, FSDP2)")
    if spread.sharding not in TRAINER_SHARDING.get(device, ()):
        return (f"{what} fits only with its state sharded over every rank (FSDP2), which the Neuron 2.28 PyTorch/XLA "
                "stack Trn1 trains on does not run: the shipped trainer trains data-parallel (DDP) there, and DDP "
                f"needs the whole model state on each {spread.rank_memory_gib:g} GiB NeuronCore")
    return None


def gib_per_rank(params: float, layers: int, hidden: int, *, shards: int, tensor: int, pipeline: int,
                 sharded: bool, vocab: int = VOCAB, recompute: bool = True) -> float:
    """The peak memory of one rank (module docstring): forward/backward or optimizer step, whichever is larger."""
    split = shards if sharded else tensor * pipeline
    state = params * STATE_BYTES_PER_PARAM / split
    if sharded:
        working = params / layers * WORKING_BYTES_PER_LAYER_PARAM / tensor
    else:
        working = params * AUTOCAST_BYTES_PER_PARAM / split
    kept_layers = -(-layers // pipeline)
    if recompute:  # each layer's input kept, one layer's activations while it recomputes
        activations = (2 * SEQUENCE * hidden * kept_layers + LAYER_ACTIVATION_BYTES * SEQUENCE * hidden) / tensor
    else:  # every layer's activations kept for backward
        activations = LAYER_ACTIVATION_BYTES * SEQUENCE * hidden * kept_layers / tensor
    logits = LOGIT_BYTES * SEQUENCE * vocab / tensor
    step = params * STEP_BYTES_PER_PARAM / split
    return (state + max(working + activations + logits, step)) / 2**30


def choose(*, parameters_billion: float, layers: int, hidden: int, heads: int, itype: InstanceType,
           nodes: int, kv_heads: int | None = None) -> Parallelism | None:
    """The simplest layout that fits, or None when none does on this many nodes of this type. `kv_heads`:
    grouped-query attention's key/value heads (None: as many as `heads`)."""
    kv_heads = kv_heads or heads
    per_node, rank_gib = devices(itype)  # one rank per GPU or (logical) NeuronCore
    ranks = per_node * nodes
    budget = rank_gib * MEMORY_FRACTION
    params = parameters_billion * 1e9

    def layout(tensor: int, pipeline: int, sharded: bool, reason: str) -> Parallelism | None:
        for recompute in (False, True):  # recompute only when the activations do not fit otherwise
            need = gib_per_rank(params, layers, hidden, shards=ranks, tensor=tensor, pipeline=pipeline,
                                sharded=sharded, recompute=recompute)
            if need <= budget:
                return Parallelism(data=ranks // (tensor * pipeline), tensor=tensor, pipeline=pipeline,
                                   sharding="full" if sharded else "none", ranks=ranks, ranks_per_node=per_node,
                                   gib_per_rank=round(need, 1), rank_memory_gib=round(rank_gib, 1), layers=layers,
                                   hidden=hidden, heads=heads, kv_heads=kv_heads, sequence=SEQUENCE, vocab=VOCAB,
                                   recompute=recompute,
                                   reason=reason + ("; activation checkpointing (recompute every block)"
                                                    if recompute else "; no activation checkpointing needed"))
        return None

    found = layout(1, 1, False, "the whole model state fits on every rank: plain data parallel (DDP)") \
        or layout(1, 1, True, "the model state fits only sharded over every rank: FSDP2 full shard")
    if found:
        return found
    # Tensor parallel stays inside a node (NVLink, NeuronLink); each rank holds whole heads, so the degree divides the
    # query heads and the key/value heads alike (Megatron-LM megatron/core/transformer/attention.py divides both
    # num_attention_heads and num_query_groups by the tensor-parallel size).
    degrees = [t for t in (2, 4, 8, 16, 32, 64)
               if t <= per_node and per_node % t == 0 and heads % t == 0 and kv_heads % t == 0]
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
