"""NxD Training (neuronx-distributed-training) layouts for Trn1/Trn1n: where data parallel does not fit.

Trn1 trains on Neuron 2.28's PyTorch/XLA stack, where the shipped trainer (examples/slurm/train.py) runs DDP only. A
model whose whole state does not fit one 16 GiB NeuronCore trains with NxD Training, as AWS's published Llama configs
do (catalog/nxd.yaml: tensor parallel inside a node, pipeline parallel across nodes, ZeRO-1, sequence parallel,
selective activation recompute). Neuron 2.28 is its last release: a legacy stack, a WARNING (software.yaml `legacy`).

The degrees obey the checks NxD makes (catalog/nxd.yaml source nxd-rules): world size = tensor x pipeline x data;
tensor parallel divides the query heads and, with KV replication (kv_replicator, NxD's kv_size_multiplier), the
key/value heads (tensor % replicator == 0, kv heads x replicator % tensor == 0) and each rank's query heads are a
whole number of its key/value heads; sequence parallel splits the sequence by the tensor degree; every pipeline
stage holds a layer (NxD gives the remainder to the last stages: the plan takes degrees that divide the layers, so
stages are even); the global batch is a whole number of micro-batches per data rank. Tensor parallel stays inside a
node (32 NeuronCores on trn1/trn1n.32xlarge).

Memory per NeuronCore, by the rules parallelism.py holds for the GPU layouts (its constants, its budget):
- state: fp32 weights and gradients (8 bytes a parameter) split over tensor x pipeline ranks; AdamW's two fp32
  moments (8) split over those and, with ZeRO-1, over the data ranks too (Rajbhandari et al. 2020, P_os); autocast's
  bf16 copy of the weights (2; the published runs are Autocast:BF16+FP32Optimizer); the step's temporaries (4) on the
  optimizer's shard;
- activations per token and layer: parallelism.py's measured block bytes, all of them divided by the tensor degree
  (sequence parallel splits the norms' full-width tensors as well); selective recompute drops what it recomputes
  (CoreAttention: attention's own; LlamaMLP: the SwiGLU's) and adds one layer's activations while it recomputes;
  under 1F1B the first pipeline stage keeps its layers' activations for as many micro-batches as there are stages;
- the logits: 16 bytes per token and vocabulary entry over the tensor degree, the vocabulary padded as NxD Training
  pads it (a multiple of 128 x tensor: lightning_modules/data/base.py _vocab_size_with_padding).
The layout taken is the one with the fewest model-parallel ranks (tensor x pipeline) that fits, tensor parallel
before pipeline parallel, the least recompute: the least communication per token; a model of a published run's size
(within PUBLISHED_MATCH) takes at least that run's tensor and pipeline degrees, as the estimate is that run's speed.

The estimate rests on Neuron's published throughput for these layouts (nxd.yaml `throughput`): each row's MFU on the
plan's 6N basis, the likely figure the run nearest in size, the range the published runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from ..catalog import InstanceType, devices, load_catalog, load_software
from ..config.schema import Workload
from ..errors import WARNING, Finding
from ..packaged import read_packaged_yaml
from . import estimates as est
from . import layout
from .train_commands import tokens_dir
from .parallelism import (ACTIVATION_ATTENTION_BYTES, ACTIVATION_MLP_BYTES, ACTIVATION_UNSPLIT_BYTES,
                          AUTOCAST_BYTES_PER_PARAM, LOGIT_BYTES, MEMORY_FRACTION, STEP_BYTES_PER_PARAM, Parallelism,
                          recipe_lr)

SHARDING = "zero1"  # Parallelism.sharding of an NxD Training layout (ZeRO-1: the optimizer state over data ranks)
WEIGHT_GRAD_BYTES = 8  # fp32 weights and gradients per parameter, on each model-parallel rank
MOMENT_BYTES = 8  # AdamW's two fp32 moments per parameter: ZeRO-1 shards them over the data ranks
NXDT_VOCAB_MULTIPLE = 128  # make_vocab_size_divisible_by's default in NxD Training
# Selective recompute, least first: NxD Training's activations_checkpoint_recompute modules. Both published Llama
# configs recompute CoreAttention (with flash attention, cheap); the 70B config adds LlamaMLP.
RECOMPUTE = (("CoreAttention",), ("CoreAttention", "LlamaMLP"))
ROPE_THETA = 500000.0  # Llama 3's rotary base, as examples/slurm/hf_export.py writes it and the published configs set it
NORM_EPS = 1e-5
LEGACY = "NxD Training on Neuron 2.28"
# A model within this factor of a published run's size takes at least that run's degrees (choose): the estimate
# is that run's measured speed, which a shallower pipeline would not reproduce.
PUBLISHED_MATCH = 1.5


@dataclass(frozen=True)
class Throughput:
    """One published NxD training run (nxd.yaml `throughput`)."""

    model: str
    parameters_billion: float
    nodes: int
    instance_types: tuple[str, ...]
    tensor: int
    pipeline: int
    data: int
    global_batch: int
    sequence: int
    sequences_per_s: float
    neuron_version: str
    source: str

    @property
    def tokens_per_s(self) -> float:
        return self.sequences_per_s * self.sequence

    def tokens_per_s_per_chip(self, itype: InstanceType) -> float:
        assert itype.accelerator
        return self.tokens_per_s / (self.nodes * itype.accelerator.count)

    def mfu(self, itype: InstanceType) -> float:
        """Model FLOPs (6 x parameters a token) over the nodes' dense BF16 peak (the catalog's)."""
        assert itype.peak_tflops
        return 6 * self.parameters_billion * 1e9 * self.tokens_per_s / (self.nodes * itype.peak_tflops * 1e12)


@dataclass(frozen=True)
class NxdFacts:
    """NeuronX Distributed facts: published throughputs, the software stack and their sources."""
    throughput: tuple[Throughput, ...]
    stack: dict
    sources: dict[str, dict]


@cache
def load_nxd() -> NxdFacts:
    data = read_packaged_yaml(Path(__file__).parent.parent / "catalog" / "nxd.yaml")
    known = {**data["sources"], **load_catalog().sources, **load_software().sources}
    rows = []
    for r in data["throughput"]:
        if r["source"] not in known:
            raise ValueError(f"nxd.yaml: {r['model']}: source {r['source']!r} is not recorded")
        if r["tensor"] * r["pipeline"] * r["data"] != r["nodes"] * 32:
            raise ValueError(f"nxd.yaml: {r['model']}: TP x PP x DP is not the published nodes' NeuronCores")
        rows.append(Throughput(r["model"], float(r["parameters_billion"]), int(r["nodes"]), tuple(r["instance_types"]),
                               int(r["tensor"]), int(r["pipeline"]), int(r["data"]), int(r["global_batch"]),
                               int(r["sequence"]), float(r["sequences_per_s"]), str(r["neuron_version"]), r["source"]))
    for key in data["stack"]["sources"]:
        if key not in known:
            raise ValueError(f"nxd.yaml stack: source {key!r} is not recorded")
    return NxdFacts(tuple(rows), dict(data["stack"]), dict(data["sources"]))


def trains_on(itype: InstanceType) -> bool:
    """Whether NxD Training is the way past data parallel on this type: its stack is Neuron 2.28's XLA path
    (catalog/software.yaml device `xla`: Trn1/Trn1n), where NxD Training is pinned beside it."""
    stack = load_software().for_type(itype) if itype.accelerator else None
    return stack is not None and not isinstance(stack, str) and stack.device == "xla" and \
        stack.neuron_release == load_nxd().stack["neuron_release"]


# ---------------------------------------------------------------- the rules NxD checks

def kv_replicator(kv_heads: int, tensor: int) -> int:
    """NxD's kv_size_multiplier: the fewest copies of each key/value head that make them divide by `tensor`."""
    return tensor // math.gcd(kv_heads, tensor)


def degree_problems(*, heads: int, kv_heads: int, hidden: int, intermediate: int, layers: int, sequence: int,
                    tensor: int, pipeline: int, ranks: int, ranks_per_node: int, global_batch: int = 0,
                    micro_batch: int = 1) -> list[str]:
    """Why NxD (or NxD Training's Llama) would refuse these degrees, in words; [] where it runs them."""
    out = []
    replicas = kv_replicator(kv_heads, tensor)
    if hidden % heads:
        out.append(f"hidden {hidden} is not a whole number of {heads} heads")
    if heads % tensor:
        out.append(f"tensor parallel {tensor} does not divide the {heads} attention heads")
    if tensor % replicas or (kv_heads * replicas) % tensor:
        out.append(f"tensor parallel {tensor} is not divisible by the KV replication {replicas}")
    elif tensor <= heads and (heads // tensor) % max(1, kv_heads * replicas // tensor):
        out.append(f"each rank's {heads // tensor} query heads are not a whole number of its key/value heads")
    if intermediate % tensor:
        out.append(f"tensor parallel {tensor} does not divide the SwiGLU width {intermediate}")
    if sequence % tensor:
        out.append(f"sequence parallel {tensor} does not divide the {sequence}-token sequence")
    if tensor > ranks_per_node or ranks_per_node % tensor:
        out.append(f"tensor parallel {tensor} does not fit a node's {ranks_per_node} NeuronCores")
    if layers % pipeline:
        out.append(f"pipeline parallel {pipeline} does not divide the {layers} layers into even stages")
    if ranks % (tensor * pipeline):
        out.append(f"the world size {ranks} is not divisible by tensor {tensor} x pipeline {pipeline}")
    elif global_batch and global_batch % (micro_batch * ranks // (tensor * pipeline)):
        out.append(f"the global batch {global_batch} is not a whole number of micro-batches of the "
                   f"{ranks // (tensor * pipeline)} data ranks")
    return out


# ---------------------------------------------------------------- memory and choice

def gib_per_core(params: float, *, layers: int, hidden: int, intermediate: int, vocab: int, sequence: int,
                 tensor: int, pipeline: int, data: int, recompute: tuple[str, ...], micro_steps: int) -> float:
    """One NeuronCore's peak under NxD Training (module docstring)."""
    model_parallel = tensor * pipeline
    state = params * (WEIGHT_GRAD_BYTES + MOMENT_BYTES / data) / model_parallel
    working = params * AUTOCAST_BYTES_PER_PARAM / model_parallel
    step = params * STEP_BYTES_PER_PARAM / (model_parallel * data)
    attention = 0 if "CoreAttention" in recompute else ACTIVATION_ATTENTION_BYTES * hidden
    mlp = 0 if "LlamaMLP" in recompute else ACTIVATION_MLP_BYTES * intermediate
    kept = (ACTIVATION_UNSPLIT_BYTES * hidden + attention + mlp) / tensor  # per token and layer, sequence parallel
    whole = (ACTIVATION_UNSPLIT_BYTES * hidden + ACTIVATION_ATTENTION_BYTES * hidden
             + ACTIVATION_MLP_BYTES * intermediate) / tensor
    in_flight = min(pipeline, micro_steps)  # 1F1B: the first stage's micro-batches in flight
    activations = sequence * (kept * (layers // pipeline) * in_flight + whole)
    rows = -(-vocab // (NXDT_VOCAB_MULTIPLE * tensor)) * NXDT_VOCAB_MULTIPLE * tensor
    logits = LOGIT_BYTES * sequence * rows / tensor
    return (state + max(working + activations + logits, step)) / 2**30


def published_run(itype: InstanceType, parameters_billion: float) -> Throughput | None:
    """Neuron's published run the estimate rests on (utilisation: the nearest in size on this type), where the model is
    of its size (within PUBLISHED_MATCH either way); None where no published run is near it."""
    rows = [r for r in load_nxd().throughput if itype.name in r.instance_types]
    if not rows:
        return None
    nearest = min(rows, key=lambda r: abs(math.log(r.parameters_billion / parameters_billion)))
    ratio = max(nearest.parameters_billion, parameters_billion) / min(nearest.parameters_billion, parameters_billion)
    return nearest if ratio <= PUBLISHED_MATCH else None


def choose(*, parameters_billion: float, layers: int, hidden: int, heads: int, kv_heads: int, intermediate: int,
           vocab: int, sequence: int, global_batch_tokens: int, itype: InstanceType, nodes: int) -> Parallelism | None:
    """The NxD Training layout that fits with the fewest model-parallel ranks (module docstring), or None. A model of a
    published run's size takes at least that run's tensor and pipeline degrees (its own where they fit): the estimate
    is that run's speed, measured at those degrees."""
    per_node, core_gib = devices(itype)
    ranks = per_node * nodes
    shape = dict(layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, intermediate=intermediate,
                 vocab=vocab, sequence=sequence)
    options = sorted(((t, p) for t in (1, 2, 4, 8, 16, 32, 64) for p in range(1, layers + 1)
                      if t <= per_node and ranks % (t * p) == 0), key=lambda tp: (tp[0] * tp[1], tp[1]))
    run = published_run(itype, parameters_billion)
    if run is not None:
        deep = [(t, p) for t, p in options if t >= run.tensor and p >= run.pipeline]
        measured = f"Neuron's {run.model} run the estimate rests on, TP {run.tensor} PP {run.pipeline}"
        found = _first_fit(deep, parameters_billion, shape, ranks, per_node, core_gib, global_batch_tokens,
                           why=f"the degrees of {measured} (the fewest model-parallel ranks that fit at least those)")
        if found is not None:
            return found
    return _first_fit(options, parameters_billion, shape, ranks, per_node, core_gib, global_batch_tokens,
                      why="the fewest model-parallel ranks that fit" + (
                          "" if run is None else f"; NOT the published degrees: the estimate was measured at TP "
                          f"{run.tensor} PP {run.pipeline} ({run.model})"))


def _first_fit(options: list[tuple[int, int]], parameters_billion: float, shape: dict, ranks: int, per_node: int,
               core_gib: float, global_batch_tokens: int, why: str) -> Parallelism | None:
    """The first (tensor, pipeline) of `options` NxD accepts whose state fits a NeuronCore, with the least recompute."""
    budget = core_gib * MEMORY_FRACTION
    params = parameters_billion * 1e9
    layers, hidden, heads, kv_heads = shape["layers"], shape["hidden"], shape["heads"], shape["kv_heads"]
    intermediate, vocab, sequence = shape["intermediate"], shape["vocab"], shape["sequence"]
    batch = max(1, global_batch_tokens // sequence)
    for t, p in options:
        data = ranks // (t * p)
        micro_steps = max(1, round(batch / data))
        if degree_problems(heads=heads, kv_heads=kv_heads, hidden=hidden, intermediate=intermediate, layers=layers,
                           sequence=sequence, tensor=t, pipeline=p, ranks=ranks, ranks_per_node=per_node,
                           global_batch=data * micro_steps):
            continue
        for recompute in RECOMPUTE:
            gib = gib_per_core(params, layers=layers, hidden=hidden, intermediate=intermediate, vocab=vocab,
                               sequence=sequence, tensor=t, pipeline=p, data=data, recompute=recompute,
                               micro_steps=micro_steps)
            if gib <= budget:
                return Parallelism(
                    data=data, tensor=t, pipeline=p, sharding=SHARDING, ranks=ranks, ranks_per_node=per_node,
                    gib_per_rank=round(gib, 1), rank_memory_gib=round(core_gib, 1), layers=layers, hidden=hidden,
                    heads=heads, kv_heads=kv_heads, intermediate=intermediate, sequence=sequence, vocab=vocab,
                    recompute=True, global_batch=data * micro_steps, lr=recipe_lr(parameters_billion),
                    reason=_reason(t, p, data, kv_heads, recompute, why),
                    nxdt={"kv_replicator": kv_replicator(kv_heads, t), "sequence_parallel": True,
                          "recompute": list(recompute)})
    return None


def _reason(t: int, p: int, data: int, kv_heads: int, recompute: tuple[str, ...], why: str) -> str:
    kv = kv_replicator(kv_heads, t)
    replicated = f", each of the {kv_heads} key/value heads replicated {kv}x (kv_replicator)" if kv > 1 else ""
    pipe = f", pipeline parallel {p} across nodes (1F1B)" if p > 1 else ""
    return (f"the model state does not fit a NeuronCore whole (the shipped trainer's DDP on Neuron 2.28): NxD Training "
            f"with tensor parallel {t} inside each node and sequence parallel{replicated}{pipe}, ZeRO-1 over the "
            f"{data:,} data ranks, selective activation recompute of {' and '.join(recompute)}; {why}")


# ---------------------------------------------------------------- estimate

def utilisation(itype: InstanceType, parameters_billion: float) -> est.UtilisationRange:
    """Low, likely and high MFU from Neuron's published NxD training throughput (nxd.yaml): likely the run nearest in
    size, the range over the published runs, each on the plan's 6N basis at this type's dense BF16 peak."""
    rows = [r for r in load_nxd().throughput if itype.name in r.instance_types]
    if not rows:
        raise KeyError(itype.name)
    nearest = min(rows, key=lambda r: abs(math.log(r.parameters_billion / parameters_billion)))
    values = sorted(r.mfu(itype) for r in rows)
    shown = "; ".join(
        f"{r.model} on {r.nodes} x {'/'.join(r.instance_types)}, TP {r.tensor} PP {r.pipeline} DP {r.data} ZeRO-1, "
        f"{r.sequence:,} tokens: {r.sequences_per_s:g} sequences/s = {r.tokens_per_s_per_chip(itype):,.0f} tokens/s a "
        f"chip = {r.mfu(itype):.1%} MFU (6N at {itype.peak_tflops:,g} TFLOPS a node; Neuron {r.neuron_version}) "
        f"[{r.source}]" for r in rows)
    basis = (f"Neuron's published NxD Training throughput on Trainium, likely = the run nearest in size "
             f"({nearest.model}): {shown}")
    return est.UtilisationRange(values[0], nearest.mfu(itype), values[-1], basis)


# ---------------------------------------------------------------- NxD Training's config, from the plan

def model_config(spread: Parallelism) -> dict:
    """The Hugging Face LlamaConfig NxD Training builds the model from (its model.model_config), the same fields
    examples/slurm/hf_export.py writes: the converted checkpoint is served with it."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": spread.vocab,
            "hidden_size": spread.hidden, "intermediate_size": spread.intermediate,
            "num_hidden_layers": spread.layers, "num_attention_heads": spread.heads,
            "num_key_value_heads": spread.kv_heads, "head_dim": spread.hidden // spread.heads, "hidden_act": "silu",
            "max_position_embeddings": spread.sequence, "rms_norm_eps": NORM_EPS, "rope_theta": ROPE_THETA,
            "rope_scaling": None, "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
            "initializer_range": 0.02, "torch_dtype": "bfloat16"}


def training_config(spread: Parallelism, *, name: str, train_dir: str, model_config_path: str, log_dir: str,
                    compiler_cache: str) -> dict:
    """NxD Training's Hydra config for this layout, section for section as AWS's published Llama configs
    (examples/conf/hf_llama3_70B_config.yaml, tests/fixtures/nxdt): the plan's shape, degrees, batch, steps,
    checkpoint cadence and learning-rate schedule (Llama 2's recipe, as the shipped trainer's)."""
    nx = spread.nxdt or {}
    steps = spread.steps or 1
    return {
        "name": name,
        "model_source": "hf",
        "seed": 1234,
        "trainer": {"devices": spread.ranks_per_node, "num_nodes": spread.ranks // spread.ranks_per_node,
                    "max_epochs": -1, "max_steps": steps, "log_every_n_steps": 10,
                    "val_check_interval": steps + 1, "check_val_every_n_epoch": None, "num_sanity_val_steps": 0,
                    "limit_val_batches": 0.0, "limit_test_batches": 0.0, "gradient_clip_val": 1.0},
        "exp_manager": {
            "log_local_rank_0_only": True, "create_tensorboard_logger": True, "explicit_log_dir": log_dir,
            "exp_dir": None, "name": name, "resume_if_exists": True, "resume_ignore_no_checkpoint": True,
            "create_checkpoint_callback": True,
            "checkpoint_callback_params": {
                "monitor": "step", "save_top_k": spread.keep_checkpoints, "mode": "max", "save_last": False,
                "filename": f"{name}--{{step}}-{{consumed_samples}}",
                "model_parallel_size": "${multiply:${distributed_strategy.tensor_model_parallel_size}, "
                                       "${distributed_strategy.pipeline_model_parallel_size}}",
                "every_n_train_steps": spread.checkpoint_every or 100, "use_master_weights_in_ckpt": False},
            "log_parameter_norm": True, "log_gradient_norm": True, "enable_recovery_time_instrumentation": False,
            "save_xser": True, "load_xser": True, "save_bf16": False, "async_checkpointing": False,
            "resume_from_checkpoint": None},
        "distributed_strategy": {
            "tensor_model_parallel_size": spread.tensor, "pipeline_model_parallel_size": spread.pipeline,
            "virtual_pipeline_model_parallel_size": 1, "context_parallel_size": 1, "zero1": True,
            "sequence_parallel": bool(nx.get("sequence_parallel", True)),
            "kv_replicator": int(nx.get("kv_replicator", kv_replicator(spread.kv_heads, spread.tensor)))},
        "data": {"micro_batch_size": spread.micro_batch, "global_batch_size": spread.global_batch or spread.data,
                 "train_dir": train_dir},
        "model": {
            "model_config": model_config_path, "encoder_seq_length": spread.sequence,
            "max_position_embeddings": spread.sequence, "num_layers": spread.layers, "hidden_size": spread.hidden,
            "qkv_linear": True, "fuse_qkv": True, "rope_theta": ROPE_THETA, "use_cpu_initialization": True,
            "activations_checkpoint_granularity": "selective",
            "activations_checkpoint_recompute": list(nx.get("recompute", RECOMPUTE[0])),
            "fusions": {"softmax": True, "flash_attention": True}, "do_layer_norm_weight_decay": True,
            "optim": {"name": "adamw", "lr": spread.lr, "weight_decay": 0.1, "capturable": False,
                      "betas": [0.9, 0.95],
                      "sched": {"name": "CosineAnnealing", "warmup_steps": spread.warmup_steps,
                                "max_steps": "${trainer.max_steps}", "min_lr": spread.lr / 10,
                                "constant_steps": 0}}},
        "precision": {"type": "mixed_precision", "master_weights": False, "fp32_grad_acc": False,
                      "xla_use_bf16": "0", "xla_downcast_bf16": "0", "neuron_rt_stochastic_rounding_en": "0"},
        "compiler_flags": "--model-type transformer",
        "compiler_cache_url": compiler_cache,
        "aync_exec_max_inflight_requests": 5,  # sic: the key NxD Training reads
        "bucket_size_collectives": 1024,
        "neuron_rt_exec_timeout": 100,
        "neuron_experimental_compress_rg": False,
    }


def with_config(spread: Parallelism, *, workload: str, tokens_dir: str, neuron_cache: str) -> Parallelism:
    """The layout with NxD Training's config and model config in it (layout.json's `nxdt`), where the launcher
    (examples/slurm/train-nxdt.sbatch) writes them out for training_orchestrator.py. The training data is the prepare
    step's shards as the Hugging Face dataset NxD Training loads (`<tokens>-nxdt`, nxdt_data.py), the checkpoints in
    the job's /fsx/checkpoints folder as the shipped trainer's."""
    name = f"{workload}-train"
    run = f"/fsx/checkpoints/{name}"
    nx = dict(spread.nxdt or {})
    nx["model_config"] = model_config(spread)
    nx["config"] = training_config(spread, name=name, train_dir=f"{tokens_dir}-nxdt",
                                   model_config_path=f"{run}/nxdt/config.json", log_dir=run,
                                   compiler_cache=neuron_cache)
    nx["convert"] = converter_arguments(spread)
    return replace(spread, nxdt=nx)


def converter_arguments(spread: Parallelism) -> list[str]:
    """checkpoint_converter.py's arguments that turn this layout's sharded checkpoint into one Hugging Face state
    (NxD Training docs, Checkpoint Conversion: NxDT to HF); the launcher adds --input_dir, --output_dir, --config."""
    nx = spread.nxdt or {}
    return ["--model_style", "hf", "--hw_backend", "trn1", "--load_xser", "True", "--tp_size", str(spread.tensor),
            "--pp_size", str(spread.pipeline), "--n_layers", str(spread.layers), "--kv_size_multiplier",
            str(nx.get("kv_replicator", 1)), "--qkv_linear", "True", "--fuse_qkv", "True", "--convert_to_full_state"]


def planned(w: Workload, spread: Parallelism, decisions: list[str], findings: list[Finding], *,
            billions: float) -> Parallelism:
    """The chosen NxD layout made runnable: its config (with_config) from the plan's steps, cadence and export, the
    decision that says which launcher trains it, and the legacy WARNING (`--strict` refuses it)."""
    spread = with_config(spread, workload=w.name, tokens_dir=tokens_dir(spread.export_dir, w.name),
                         neuron_cache=f"{layout.FSX_MOUNT}/neuron-cache")
    stack = load_nxd().stack
    pins = ", ".join(f"{k} {v}" for k, v in stack["pins"].items())
    decisions.append(f"trainer: NxD Training ({pins}, Neuron {stack['neuron_release']}) launched by "
                     "train-nxdt.sbatch with a config generated from this plan (tensor "
                     f"{spread.tensor}, pipeline {spread.pipeline}, kv_replicator {spread.nxdt['kv_replicator']}, "
                     f"{spread.steps:,} steps, a checkpoint every {spread.checkpoint_every:,}, written synchronously as in AWS's "
                     "configs: the cadence keeps even a blocking write within its share); its last checkpoint is "
                     "converted to the Hugging Face layout by NxD's checkpoint converter for serving")
    findings.append(Finding(
        WARNING, "training.instance_type", w.training.instance_type or "trn1",
        f"NxD Training's launcher (training_orchestrator.py) and checkpoint converter come from "
        f"{stack['examples_repo']} at {stack['examples_commit'][:8]}, its {stack['examples_release']} release "
        f"(NxD Training {stack['examples_version']}, the last public commit), and run against the "
        f"{stack['pins']['neuronx_distributed_training']} wheel of Neuron {stack['neuron_release']}: no public "
        "release of them matches the wheel", (lambda src: f"{src['title']} <{src['url']}>")(
            load_nxd().sources["nxdt-repo"])))
    eos = load_software().sources["neuron-nxdt-eos"]
    findings.append(Finding(
        WARNING, "training.instance_type", w.training.instance_type or "trn1",
        f"{LEGACY}: a {billions:.3g}B model does not fit Trn1's data-parallel trainer (DDP), so it trains "
        "with NxD Training (tensor/pipeline parallel, ZeRO-1), a legacy stack whose last release is Neuron 2.28 "
        "(no fixes after it); Trn2 with TorchNeuron is where new work goes", f"{eos.title} <{eos.url}>"))
    return spread
