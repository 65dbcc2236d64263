"""How a deep-learning model is spread over the planned cluster: data, tensor and pipeline degrees and sharding.

The seeds name three modes (data, tensor and pipeline parallel) plus sharded data parallel. The choice, from memory
and communication:
1. data parallel (PyTorch DDP) where every rank holds the whole model state;
2. else sharded: FSDP2 (`fully_shard`, ZeRO-3) over the data ranks, with tensor parallel inside a node (DTensor:
   each block's projections split over t ranks on NVLink or NeuronLink) where FSDP2 alone would recompute every block
   (its activations do not fit: tensor parallel divides them by t, a second forward costs a third more compute), or
   would have more data ranks than the global batch has sequences, or not a whole number of micro-steps per step
   (tensor parallel divides the data ranks by t: each gathers its shards for t times as many tokens);
   then HSDP where the state fits a shard group inside a node (or a group of nodes) and the EFA traffic per step
   drops (communication.py): FSDP2 over a (replicate, shard) mesh, gradients all-reduced across the replicas once a
   step instead of every weight gathered over the network every micro-step;
3. pipeline parallel across nodes on top: splits the layers (their state and stored activations) into stages of
   contiguous blocks, the trainer's pipeline.py (torch.distributed.pipelining: 1F1B over the step's micro-steps, GPipe
   where a step has fewer micro-steps than stages), with tensor parallel inside a node and FSDP2 over each stage's
   data ranks.
A layout that still does not fit is refused, naming the fields that would change it.

The global batch is fixed in tokens (training.global_batch_tokens, Llama 2's 4M by default): each data rank takes one
sequence per micro-step and accumulates gradients over global batch / data ranks micro-steps, whatever the node count.

Memory per rank, in bytes, as examples/slurm/train.py holds it (measured on an H100, 2026-11-23: the fixtures of
tests/test_parallelism.py). The peak is the larger of the forward/backward and the optimizer step:
- model state: 16 per parameter, divided by the ranks it is sharded over: fp32 weights, fp32 gradients and AdamW's
  two fp32 moments. DDP keeps its gradients in its buckets (gradient_as_bucket_view) and computes in bf16 under
  autocast; FSDP2 keeps fp32 shards and casts to bf16 per layer (MixedPrecisionPolicy) with fp32 reduction. With
  gradient accumulation FSDP2 reduce-scatters every micro-step (train.py micro_step), so its gradients stay sharded:
  with the sync off until the last micro-step it would hold every parameter's unsharded fp32 gradient on each rank.
  (ZeRO's accounting gives the same 16: Rajbhandari et al. 2020, section 3.1.)
- forward/backward: DDP also holds autocast's bf16 copy of every weight (2 per parameter) until the forward
  ends; FSDP2 holds a gathered layer's bf16 weights and gradients (4 per parameter of one layer);
- activations, one sequence per rank: without recompute every layer's (measured for train.py's block:
  ACTIVATION_*, 16 x hidden + 8.5 x hidden + 8 x SwiGLU width bytes per token, fused attention storing no scores);
  with activation checkpointing each layer's input (2 x sequence x hidden per layer) plus one layer's activations
  while it recomputes. Tensor parallel (no sequence parallel) divides only what attention and the MLP keep inside;
  pipeline parallel divides the layers each rank keeps, but under 1F1B the first stage runs `pipeline` micro-batches'
  forwards before its first backward (torch.distributed.pipelining Schedule1F1B: warmup_chunks = stages - stage
  index), so it keeps that many micro-batches' activations of its layers: about the unsplit model's one. The last
  stage keeps one micro-batch's and the logits; the peak is the larger of the two;
- the logits and the loss: 16 bytes per token and vocabulary entry (bf16 logits, their fp32 copy, log-softmax
  and its gradient); 7.8 GiB at 4096 tokens of a 128k vocabulary, more than a small model's state;
- the optimizer step: the state plus 4 per parameter of temporaries for foreach AdamW, PyTorch's default where
  no fused kernel is used (the trainer uses the fused kernel on GPUs; the plan counts the foreach peak for all).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace

from ..catalog import InstanceType, devices
from ..config.model import DEFAULT_VOCAB
from .communication import step

# fp32 weights, fp32 gradients (FSDP2: sharded after every micro-step's reduce-scatter, examples/slurm/train.py
# micro_step; tests/test_trainer.py measures it) and AdamW's two fp32 moments.
GRADIENT_BYTES_PER_PARAM = 4
STATE_BYTES_PER_PARAM = 4 + GRADIENT_BYTES_PER_PARAM + 8
AUTOCAST_BYTES_PER_PARAM = 2  # DDP
WORKING_BYTES_PER_LAYER_PARAM = 4  # FSDP2
# What autograd keeps for backward per token in one of train.py's blocks without recompute (bf16, RMSNorm in fp32),
# measured with `python -m tools.activation_bytes` (saved_tensors_hooks, torch 2.15 on CPU, 2026-11-25; hidden 1024,
# 8 heads, 2 KV heads, SwiGLU 3584, 1,024 tokens; tests/test_parallelism.py re-measures a small block): 16 bytes per
# hidden unit that tensor parallel does not split (the two norms' fp32 input and output, which also feed q/k/v, gate
# and up: no sequence parallel), 8.5 per hidden unit inside attention (rotated q, repeated k and v, the attention
# output and o's input) and 8 per SwiGLU unit (gate, up, silu and their product), both split. In place of Korthikanti
# et al.'s 34 (https://arxiv.org/abs/2205.05198, eq. 1: a GELU MLP at 4h), which counts half of what this block keeps.
ACTIVATION_UNSPLIT_BYTES = 16  # per token and hidden unit
ACTIVATION_ATTENTION_BYTES = 8.5  # per token and hidden unit, divided by tensor parallel
ACTIVATION_MLP_BYTES = 8  # per token and SwiGLU unit, divided by tensor parallel
FFN_RATIO = 3.5  # SwiGLU width over hidden where none is given: Llama 3.1 8B's and 70B's, the widest usual one
LOGIT_BYTES = 16  # per token and vocabulary entry
STEP_BYTES_PER_PARAM = 4  # foreach AdamW's temporaries
# Model FLOPs over hardware FLOPs with every block recomputed: 6N of 8N per token (a second forward of 2N).
RECOMPUTE_EFFICIENCY = 6 / 8
SEQUENCE = 4096  # tokens per training sequence by default (training.sequence_length), one per rank per micro-step
VOCAB = DEFAULT_VOCAB  # the decoder's vocabulary by default (Llama 2's tokenizer; model.vocab_size), written into the layout
# Llama 2's pretraining recipe (Touvron et al. 2023, https://arxiv.org/abs/2307.09288, section 2.2 and Table 1): a
# global batch of 4M tokens; peak learning rate 3e-4 for 7B and 13B, 1.5e-4 for 34B and 70B; 2000 warmup steps (the
# trainer holds the rest: AdamW betas 0.9/0.95, weight decay 0.1, cosine to 10%, clipping 1.0).
GLOBAL_BATCH_TOKENS = 4 * 2**20
RECIPE_LR = ((20, 3e-4), (float("inf"), 1.5e-4))  # (up to billions of parameters, peak learning rate)
RECIPE_WARMUP = 2000
# Model state, working weights and activations fill at most this share of a rank's memory; the rest is the
# framework, communication buffers and fragmentation (the allocator reserved 1.04-1.08x what tensors held in
# the H100 measurements with the fused optimizer).
MEMORY_FRACTION = 0.85


@dataclass(frozen=True)
class Parallelism:
    """How a training run is split: data, tensor and pipeline degrees, sharding, and memory per rank."""
    data: int
    tensor: int
    pipeline: int
    sharding: str  # "none" (DDP, every rank holds the whole state) | "full" (FSDP2 fully_shard over data ranks) |
    # "hybrid" (HSDP: FSDP2 over a (replicate, shard) mesh, the state sharded within shard_group data ranks)
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
    intermediate: int = 0  # SwiGLU width: the planned decoder's (0: the trainer's Llama 3 rule)
    keep_checkpoints: int = 2  # what FSx is sized for; the trainer deletes older ones
    export_dir: str = ""  # where the trainer writes the final Hugging Face directory (FSx exports it to models/)
    shutdown_timeout_s: int = 30  # torchrun's wait after SIGTERM: the checkpoint time (TORCH_ELASTIC_SHUTDOWN_TIMEOUT)
    signal_lead_s: int = 120  # how early Slurm signals before the time limit: the shutdown time plus a step
    steps: int = 0  # the plan's tokens over the global batch; 0: the trainer's default
    micro_batch: int = 1  # sequences per data rank per micro-step
    global_batch: int = 0  # sequences per optimizer step: data x micro_batch x micro-steps (0: data x micro_batch)
    precision: str = "bf16"  # compute dtype: bf16, or fp16 with loss scaling where the accelerator has no bf16
    lr: float = 3e-4  # peak learning rate (RECIPE_LR)
    warmup_steps: int = 0  # linear warmup before the cosine decay
    checkpoint_every: int = 0  # steps between the background checkpoints (0: the trainer's default)
    shard_group: int = 0  # sharding "hybrid": data ranks each shard group holds the state over (0: all data ranks)
    # sharding "zero1" (NxD Training on Trn1, nxd.py): its KV replication, sequence parallel and recompute modules,
    # then the config, model config and checkpoint conversion the launcher (train-nxdt.sbatch) writes out and runs.
    nxdt: dict | None = None
    task: str = "causal-lm"  # what is trained: a decoder language model, or an encoder's sequence classification
    epochs: float = 0.0  # sequence classification: passes over the labelled examples (the trainer's steps follow)
    # A decoder fine-tuned from base weights (finetune_recipe.py): the recipe's learning rate, weight decay, warmup
    # share and global batch tokens, which examples/slurm/finetune.py runs (None: pre-training's recipe).
    finetune: dict | None = None
    # model.family's rotary embedding (catalog/model_families.yaml: rope_theta, rope_scaling), which a from-scratch run
    # builds and exports (None: the trainer's Llama 3 defaults).
    family: dict | None = None

    def as_json(self) -> str:
        """The layout as train.py reads it: the nodes' layout.json, or a training job's LAYOUT_JSON (`nxdt` only where
        NxD Training runs it)."""
        fields = asdict(self)
        for optional in ("nxdt", "finetune", "family"):
            if fields[optional] is None:
                del fields[optional]
        return json.dumps(fields, sort_keys=True)


# What the shipped trainer (examples/slurm/train.py) runs, by the node stack's device (catalog/software.yaml): DDP,
# FSDP2 (`fully_shard`), tensor parallel (DTensor) with FSDP2 across and pipeline stages (pipeline.py). On Trn1 (device xla:
# Neuron 2.28's PyTorch/XLA stack) DDP only: FSDP2 and DTensor are native PyTorch, which TorchNeuron brings to Trn2
# and not to Trn1, and PyTorch/XLA's own sharding (NxD's ZeRO-1, tensor parallel) is not in the example.
TRAINER_SHARDING = {"cuda": ("none", "full", "hybrid"), "neuron": ("none", "full", "hybrid"), "xla": ("none",)}


def trainer_refusal(spread: Parallelism, device: str, *, what: str) -> str | None:
    """Why the shipped trainer cannot run this layout on `device`, or None when it can. `what`: the model and
    cluster in words, for the message. A ZeRO-1 layout is NxD Training's on Trn1 (nxd.py), not the shipped trainer's."""
    if spread.sharding == "zero1" and device == "xla":
        return None
    if spread.pipeline > 1 and device == "xla":
        return (f"{what} needs pipeline parallel {spread.pipeline} ({spread.reason}), which the shipped trainer runs "
                "on native PyTorch (CUDA, TorchNeuron: torch.distributed.pipelining), not on the Neuron 2.28 "
                "PyTorch/XLA stack")
    if spread.tensor > 1 and (spread.sharding == "none" or device == "xla"):
        return (f"{what} needs tensor parallel {spread.tensor} ({spread.reason}), which the shipped trainer runs with "
                "FSDP2 across nodes on native PyTorch (CUDA, TorchNeuron), not on the Neuron 2.28 PyTorch/XLA stack")
    if spread.sharding not in TRAINER_SHARDING.get(device, ()):
        return (f"{what} fits only with its state sharded over every rank (FSDP2), which the Neuron 2.28 PyTorch/XLA "
                "stack Trn1 trains on does not run: the shipped trainer trains data-parallel (DDP) there, and DDP "
                f"needs the whole model state on each {spread.rank_memory_gib:g} GiB NeuronCore")
    return None


def pipeline_bubble(spread: Parallelism) -> float:
    """A pipelined step's time over its compute: with m micro-batches through p stages each stage idles while the
    first micro-batch fills the pipeline and the last drains it, (p - 1) micro-batch times a step for 1F1B and GPipe
    alike (Narayanan et al. 2021, https://arxiv.org/abs/2104.04473, section 2.2.1: bubble fraction (p - 1) / m);
    1.0 without stages."""
    micro = max(1, spread.global_batch // max(1, spread.data * spread.micro_batch))
    return (micro + spread.pipeline - 1) / micro


# Megatron-LM pads the vocabulary to a multiple of make_vocab_size_divisible_by (default 128, arguments.py) x the
# tensor-parallel size (megatron/training/tokenizer/tokenizer.py _vocab_size_with_padding). The trainer pads only where
# tensor parallel does not divide the vocabulary (examples/slurm/recipe.py padded_vocab, the same rule) and masks the
# padding logits out of the loss; the export drops the padding rows.
VOCAB_PAD_MULTIPLE = 128


def padded_vocab(vocab: int, tensor: int) -> int:
    """The output head's rows under tensor parallel `tensor`: `vocab` where `tensor` divides it, else the next
    multiple of VOCAB_PAD_MULTIPLE x `tensor`."""
    if tensor <= 1 or vocab % tensor == 0:
        return vocab
    multiple = VOCAB_PAD_MULTIPLE * tensor
    return -(-vocab // multiple) * multiple


def layer_activation_bytes(hidden: int, intermediate: int, tensor: int) -> float:
    """Bytes one block keeps for backward per token on one rank (the ACTIVATION_* constants): tensor parallel divides
    what attention and the MLP keep, not the norms' full-width tensors."""
    return ACTIVATION_UNSPLIT_BYTES * hidden + (ACTIVATION_ATTENTION_BYTES * hidden
                                                + ACTIVATION_MLP_BYTES * intermediate) / tensor


def gib_per_rank(params: float, layers: int, hidden: int, *, shards: int, tensor: int, pipeline: int,
                 sharded: bool, vocab: int = VOCAB, recompute: bool = True, sequence: int = SEQUENCE,
                 intermediate: int = 0) -> float:
    """The peak memory of one rank (module docstring): forward/backward or optimizer step, whichever is larger.
    `intermediate`: the SwiGLU width (0: FFN_RATIO x hidden)."""
    intermediate = intermediate or round(FFN_RATIO * hidden)
    split = shards if sharded else tensor * pipeline
    state = params * STATE_BYTES_PER_PARAM / split
    if sharded:
        working = params / layers * WORKING_BYTES_PER_LAYER_PARAM / tensor
    else:
        working = params * AUTOCAST_BYTES_PER_PARAM / split
    kept_layers = -(-layers // pipeline)
    layer = sequence * layer_activation_bytes(hidden, intermediate, tensor)

    def activations(in_flight: int) -> float:  # micro-batches whose activations a stage keeps at once
        if recompute:  # each layer's bf16 input kept (whole on every tensor rank), one layer's as it recomputes
            return 2 * sequence * hidden * kept_layers * in_flight + layer
        return layer * kept_layers * in_flight  # every layer's activations kept for backward

    logits = LOGIT_BYTES * sequence * padded_vocab(vocab, tensor) / tensor
    stage = activations(1) + logits if pipeline == 1 else max(activations(pipeline), activations(1) + logits)
    step = params * STEP_BYTES_PER_PARAM / split
    return (state + max(working + stage, step)) / 2**30


def recipe_lr(parameters_billion: float) -> float:
    return next(lr for limit, lr in RECIPE_LR if parameters_billion <= limit)


def choose(*, parameters_billion: float, layers: int, hidden: int, heads: int, itype: InstanceType,
           nodes: int, kv_heads: int | None = None, vocab: int = VOCAB, sequence: int = SEQUENCE,
           global_batch_tokens: int = GLOBAL_BATCH_TOKENS, intermediate: int = 0) -> Parallelism | None:
    """The layout that fits and trains fastest by the rules of the module docstring, or None when none fits on this
    many nodes of this type. `kv_heads`: grouped-query attention's key/value heads (None: as many as `heads`);
    `intermediate`: the SwiGLU width the trainer builds, written into the layout (0: the trainer's own rule). A
    vocabulary tensor parallel does not divide is padded (padded_vocab), said in the reason."""
    spread = _choose(parameters_billion=parameters_billion, layers=layers, hidden=hidden, heads=heads, itype=itype,
                     nodes=nodes, kv_heads=kv_heads, vocab=vocab, sequence=sequence,
                     global_batch_tokens=global_batch_tokens, intermediate=intermediate)
    if spread is None or (rows := padded_vocab(vocab, spread.tensor)) == vocab:
        return spread
    return replace(spread, reason=spread.reason + (
        f"; the {vocab:,}-entry vocabulary does not divide by tensor parallel {spread.tensor}: the embedding and "
        f"output head are padded to {rows:,} rows (a multiple of {VOCAB_PAD_MULTIPLE} x {spread.tensor}, as "
        "Megatron-LM pads them), the padding logits masked out of the loss and dropped from the export"))


def _choose(*, parameters_billion: float, layers: int, hidden: int, heads: int, itype: InstanceType,
            nodes: int, kv_heads: int | None, vocab: int, sequence: int,
            global_batch_tokens: int, intermediate: int) -> Parallelism | None:
    kv_heads = kv_heads or heads
    per_node, rank_gib = devices(itype)  # one rank per GPU or (logical) NeuronCore
    ranks = per_node * nodes
    budget = rank_gib * MEMORY_FRACTION
    params = parameters_billion * 1e9
    batch = max(1, global_batch_tokens // sequence)  # sequences per optimizer step
    precision = "fp16" if itype.peak_tflops_dtype == "fp16" else "bf16"  # catalog: the type's tensor-core dtype

    def need(tensor: int, pipeline: int, sharded: bool, recompute: bool) -> float:
        return gib_per_rank(params, layers, hidden, shards=ranks, tensor=tensor, pipeline=pipeline, sharded=sharded,
                            vocab=vocab, recompute=recompute, sequence=sequence, intermediate=intermediate)

    def layout(tensor: int, pipeline: int, sharded: bool, reason: str) -> Parallelism | None:
        for recompute in (False, True):  # recompute only when the activations do not fit otherwise
            gib = need(tensor, pipeline, sharded, recompute)
            if gib <= budget:
                data = ranks // (tensor * pipeline)
                micro_steps = max(1, round(batch / data))
                return Parallelism(data=data, tensor=tensor, pipeline=pipeline,
                                   sharding="full" if sharded else "none", ranks=ranks, ranks_per_node=per_node,
                                   gib_per_rank=round(gib, 1), rank_memory_gib=round(rank_gib, 1), layers=layers,
                                   hidden=hidden, heads=heads, kv_heads=kv_heads, sequence=sequence, vocab=vocab,
                                   intermediate=intermediate,
                                   recompute=recompute, global_batch=data * micro_steps, precision=precision,
                                   lr=recipe_lr(parameters_billion),
                                   reason=reason + ("; activation checkpointing (recompute every block)"
                                                    if recompute else "; no activation checkpointing needed"))
        return None

    found = layout(1, 1, False, "the whole model state fits on every rank: plain data parallel (DDP)")
    if found:
        return found
    # Tensor parallel stays inside a node (NVLink, NeuronLink); each rank holds whole heads, so the degree divides the
    # query heads and the key/value heads alike (Megatron-LM megatron/core/transformer/attention.py divides both
    # num_attention_heads and num_query_groups by the tensor-parallel size).
    degrees = [t for t in (2, 4, 8, 16, 32, 64)
               if t <= per_node and per_node % t == 0 and heads % t == 0 and kv_heads % t == 0
               and intermediate % t == 0]  # the trainer splits the SwiGLU width evenly too
    sharded = [(t, found) for t in [1, *degrees]
               if (found := layout(t, 1, True, "")) is not None]
    if sharded:
        def cost(item: tuple[int, Parallelism]) -> tuple:
            t, spread = item
            return (spread.recompute, spread.data > batch, batch % spread.data != 0, t)

        t, best = min(sharded, key=cost)
        plain = dict(sharded).get(1)
        best = replace(best, reason=_sharded_reason(t, best, plain, batch, sequence))
        return _hybrid(best, itype, parameters_billion, nodes=nodes, budget=budget) or best
    for p in (p for p in range(2, nodes + 1) if nodes % p == 0 and p <= layers):
        for t in degrees or [1]:
            found = layout(t, p, True, f"FSDP2 with tensor parallel does not fit (one sequence's activations and "
                                       f"logits): pipeline parallel {p} across nodes, tensor parallel {t} inside, "
                                       "FSDP2 over each stage's data ranks; the logits on the last stage only")
            if found:
                micro = found.global_batch // (found.data * found.micro_batch)
                kind = "1F1B" if micro >= p else "GPipe (fewer micro-batches than stages)"
                return replace(found, reason=f"{found.reason}; the stages run {kind} over the step's {micro} "
                                             f"micro-batches, each stage idle {p - 1} of {micro + p - 1} "
                                             "micro-batch times a step (the pipeline's fill and drain: "
                                             f"x{pipeline_bubble(found):.3f} the step's time)")
    return None


# HSDP replaces full sharding only where it cuts the EFA traffic a node sends per step by more than this share.
HYBRID_MIN_SAVING = 0.10


def _hybrid(best: Parallelism, itype: InstanceType, parameters_billion: float, *, nodes: int,
            budget: float) -> Parallelism | None:
    """HSDP (FSDP2 over a 2-D mesh: shard within a group, replicate across the groups) where the model state fits a
    shard group inside a node or a group of nodes at `best`'s recompute setting, and the inter-node traffic per step
    drops: full sharding gathers every weight over EFA every micro-step, HSDP only all-reduces each shard's
    gradients across the replicas once a step (workloads/planning/communication.py). None: full sharding stays."""
    t, per_node = best.tensor, best.ranks_per_node
    full = step(best, itype, parameters_billion=parameters_billion, compute_s=1.0).inter_node_gb
    if full <= 0:  # one node: nothing crosses EFA, so HSDP would only add an all-reduce
        return None
    options = []
    for shard in range(1, best.data):
        group = shard * t
        inside = group <= per_node and per_node % group == 0
        whole_nodes = group % per_node == 0 and nodes % (group // per_node) == 0
        if best.data % shard or not (inside or whole_nodes):
            continue
        gib = gib_per_rank(parameters_billion * 1e9, best.layers, best.hidden, shards=group, tensor=t, pipeline=1,
                           sharded=True, vocab=best.vocab, recompute=best.recompute, sequence=best.sequence,
                           intermediate=best.intermediate)
        if gib > budget:
            continue
        spread = replace(best, sharding="hybrid", shard_group=shard, gib_per_rank=round(gib, 1))
        options.append((step(spread, itype, parameters_billion=parameters_billion, compute_s=1.0).inter_node_gb,
                        -shard, spread))
    if not options:
        return None
    gb, _, spread = min(options, key=lambda o: o[:2])
    if gb > full * (1 - HYBRID_MIN_SAVING):
        return None
    where = "inside a node" if spread.shard_group * t <= per_node else \
        f"over {spread.shard_group * t // per_node} nodes"
    why = (f"HSDP: the model state fits a shard group of {spread.shard_group:,} data ranks {where} "
           f"({spread.gib_per_rank:g} GiB a rank), so FSDP2 shards within it and replicates across "
           f"{spread.data // spread.shard_group:,} groups: the EFA traffic a node sends per step drops from "
           f"{full:,.0f} GB (full shard: every weight gathered over the network every micro-step) to {gb:,.0f} GB "
           "(each shard's gradients all-reduced once)")
    kept = best.reason.split(": tensor parallel", 1)
    tp = f"; tensor parallel {t} inside each node ({kept[0]})" if t > 1 else ""
    recompute = ("; activation checkpointing (recompute every block)" if best.recompute
                 else "; no activation checkpointing needed")
    return replace(spread, reason=why + tp + recompute)


def _sharded_reason(t: int, best: Parallelism, plain: Parallelism | None, batch: int, sequence: int) -> str:
    """Why FSDP2 alone, or why tensor parallel t inside each node with FSDP2 across: what FSDP2 alone would cost."""
    recompute = ("; activation checkpointing (recompute every block)" if best.recompute
                 else "; no activation checkpointing needed")
    if t == 1:
        return "the model state fits only sharded over every rank: FSDP2 full shard" + recompute
    if plain is None:
        why = "FSDP2 alone does not fit (activations and logits per rank)"
    elif plain.recompute and not best.recompute:
        why = (f"FSDP2 alone would recompute every block ({sequence:,}-token activations do not fit), a third more "
               f"compute; tensor parallel {t} divides them by {t}")
    elif plain.data > batch:
        why = (f"FSDP2 alone would run {plain.data:,} data ranks for a {batch:,}-sequence global batch; tensor "
               f"parallel {t} leaves {best.data:,}")
    else:
        why = (f"FSDP2 alone's {plain.data:,} data ranks take no whole number of micro-steps of a {batch:,}-sequence "
               f"global batch; with tensor parallel {t}, {best.data:,} do")
    return (f"{why}: tensor parallel {t} inside each node (NVLink/NeuronLink), FSDP2 over the {best.data:,} data "
            f"ranks across nodes, each gathering its shards for {t} times the tokens" + recompute)


def global_batch_line(spread: Parallelism, *, asked: int, said: str, sequence_note: str = "", tail: str = "") -> str:
    """The decision line of a global batch: sequences x tokens (`sequence_note` says where the length comes from),
    what was asked (`said`) and how data ranks, micro-batch and gradient accumulation make it up."""
    per_step = spread.global_batch * spread.sequence
    micro_steps = spread.global_batch // (spread.data * spread.micro_batch)
    line = (f"global batch: {spread.global_batch:,} sequences of {spread.sequence:,} tokens{sequence_note} = "
            f"{per_step:,} tokens ({said}: {asked:,}) = {spread.data:,} data ranks x {spread.micro_batch} sequence x "
            f"{micro_steps} micro-steps (gradient accumulation){tail}")
    if per_step != asked:
        line += f"; {per_step / asked:.0%} of the asked batch: the nearest whole number of micro-steps"
    return line
