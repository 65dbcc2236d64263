"""Issue 11: the plan's layout (training.parallelism): the simplest spread whose memory per rank fits, degrees
whose product is the rank count, and a refusal when nothing fits. Its plan JSON: test_planner.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from workloads import load, plan
from workloads.catalog import load_catalog
from workloads.planning.parallelism import choose, gib_per_rank

from .conftest import ROOT, TRN2


def _types():
    return load_catalog().types


@pytest.mark.parametrize("preset, overrides, sharding, ranks", [
    ("intermediate", {"training.instance_type": "p5.48xlarge"}, "none", 8),  # 3B in 80 GB: DDP
    ("intermediate", {"training.instance_type": "p4d.24xlarge"}, "full", 8),  # p4d (40 GB): sharded over the node
    ("huge", TRN2, "full", 16 * 64), ("huge", None, "full", 16 * 8)])
def test_presets_get_the_simplest_layout_that_fits(preset, overrides, sharding, ranks):
    spread = plan(load(preset, overrides)).training.parallelism
    assert spread.sharding == sharding and spread.ranks == ranks
    assert spread.data * spread.tensor * spread.pipeline == spread.ranks
    assert spread.gib_per_rank <= 0.85 * spread.rank_memory_gib


def test_activations_that_do_not_fit_sharded_get_tensor_parallel_dividing_the_heads():
    # A GPT-3-sized decoder (96 layers, hidden 12288, 96 heads) on 64 x trn1.32xlarge: sharded state is small,
    # but a gathered layer and the activations exceed a 16 GiB NeuronCore until tensor parallel splits them.
    spread = choose(parameters_billion=175, layers=96, hidden=12288, heads=96, itype=_types()["trn1.32xlarge"],
                    nodes=64)
    assert spread is not None and spread.tensor > 1 and spread.pipeline == 1 and spread.sharding == "full"
    assert 96 % spread.tensor == 0 and spread.data == 64 * 32 // spread.tensor and spread.tensor <= 32


def test_a_model_that_fits_no_layout_is_refused():
    assert choose(parameters_billion=70, layers=80, hidden=8192, heads=64, itype=_types()["p4d.24xlarge"],
                  nodes=2) is None


# Peak memory of examples/slurm/train.py on one NVIDIA H100 80GB HBM3, measured 2026-11-23 on the device machine
# lent to this project (torch 2.11.0+cu130, NCCL 2.28.9, one rank, one 4096-token sequence, 12 steps; the trainer's
# own "peak ... GiB allocated" line, torch.cuda.max_memory_allocated). Shapes: the intermediate plan's decoder
# (28 x 3072), a 1.3B one (24 x 2048), and a 2-layer one with a 128k vocabulary where the logits dominate.
# "foreach" is PyTorch's default AdamW, "fused" the trainer's choice on GPUs. Before DDP kept its gradients in
# its buckets the intermediate model peaked at 75.6 GiB, 12.6 GiB (4 B/param) above these.
H100_PEAKS = [  # (parameters, layers, hidden, vocab, sharding, optimizer, GiB allocated)
    (3_367_852_032, 28, 3072, 32000, "none", "foreach", 63.0),
    (3_367_852_032, 28, 3072, 32000, "full", "foreach", 63.0),
    (1_339_232_256, 24, 2048, 32000, "none", "foreach", 25.3),
    (1_339_232_256, 24, 2048, 32000, "full", "foreach", 25.3),
    (287_844_352, 2, 1024, 128256, "none", "foreach", 12.6),
    (287_844_352, 2, 1024, 128256, "full", "foreach", 10.7),
    (3_367_852_032, 28, 3072, 32000, "none", "fused", 63.0),
    (3_367_852_032, 28, 3072, 32000, "full", "fused", 52.5),
    (1_339_232_256, 24, 2048, 32000, "full", "fused", 21.9),
]


@pytest.mark.parametrize("params, layers, hidden, vocab, sharding, optimizer, measured", H100_PEAKS)
def test_the_memory_per_rank_matches_what_the_trainer_measured_on_an_h100(params, layers, hidden, vocab, sharding,
                                                                        optimizer, measured):
    # Never materially under what the trainer held (a plan that fits must run), and at most a quarter over (the
    # plan counts foreach AdamW's step where the fused kernel needs less, and FSDP2's logits generously).
    # The SwiGLU width these multi-head decoders had: what their parameters leave after embeddings, head,
    # attention (4 x hidden^2 a layer) and norms.
    width = round(((params - 2 * vocab * hidden - hidden) / layers - 4 * hidden**2 - 2 * hidden) / (3 * hidden))
    estimate = gib_per_rank(params, layers, hidden, shards=1, tensor=1, pipeline=1, sharded=sharding == "full",
                            vocab=vocab, intermediate=width)
    assert 0.97 * measured <= estimate <= 1.25 * measured, (estimate, measured)


# A grid of decoder shapes for the property below: head counts that 2, 4, 8 and 16 do and do not divide, each with
# grouped-query key/value heads among its divisors (one per head included), at sizes from 7B to 405B.
_SIZES = ((7, 32, 4096), (13, 40, 5120), (34, 48, 8192), (70, 80, 8192), (175, 96, 12288), (405, 126, 16384))
_HEADS = {20: (20, 4), 28: (28, 4, 2), 32: (32, 8), 40: (40, 8), 48: (48, 8), 52: (52, 4), 56: (56, 8), 64: (64, 8),
          96: (96, 8), 112: (112, 16), 128: (128, 8, 1)}
_NODES = (1, 2, 4, 8, 16, 64)


def test_every_tensor_parallel_degree_the_planner_emits_divides_the_heads_and_kv_heads():
    """Over every accelerated training type, shape and cluster size of the grid: a layout with tensor parallelism
    holds whole query and key/value heads on each rank, stays inside a node and records the kv heads it was chosen
    for. The grid reaches tensor parallel 2, 4 and 8, so the property is not vacuous."""
    from workloads.catalog import devices

    emitted = set()
    types = [t for t in _types().values() if t.accelerator and t.accelerator.kind in ("nvidia-gpu", "trainium")]
    for itype in types:
        per_node, _ = devices(itype)
        for (params, layers, hidden), (heads, kvs), nodes in (
                (size, h, n) for size in _SIZES for h in _HEADS.items() for n in _NODES):
            for kv in kvs:
                spread = choose(parameters_billion=params, layers=layers, hidden=hidden, heads=heads, kv_heads=kv,
                                itype=itype, nodes=nodes)
                if spread is None:
                    continue
                where = (itype.name, params, heads, kv, nodes, spread.tensor)
                assert heads % spread.tensor == 0 and kv % spread.tensor == 0, where
                assert per_node % spread.tensor == 0 and spread.kv_heads == kv, where
                emitted.add(spread.tensor)
    assert {1, 2, 4, 8} <= emitted, emitted


@pytest.mark.parametrize("itype", ["p4d.24xlarge", "p5.48xlarge", "trn1.32xlarge", "trn2.48xlarge"])
@pytest.mark.parametrize("heads", [None, "20", "28", "52", "56"])
def test_the_planner_passes_the_models_kv_heads_to_its_layouts(itype, heads):
    """The layouts the planner derives from a config (its plan's, and each candidate's for its utilisation and
    refusals) carry the model's grouped-query key/value heads and never split a head, whatever attention_heads the
    config sets, from one node up."""
    from workloads.planning.training_layout import choose_layout
    from workloads.config.model import attention_heads, model_shape

    w = load("huge", {"training.instance_type": itype, **({"model.attention_heads": heads} if heads else {})})
    (query, _), usual_kv = attention_heads(w), model_shape(w)[2]
    tensor = set()
    for nodes in (1, 2, 4, 16):
        spread = choose_layout(w, _types()[itype], nodes)
        if spread is None:
            continue
        assert spread.heads == query and spread.kv_heads == (usual_kv if query % usual_kv == 0 else query)
        # NxD Training (Trn1 beyond DDP) replicates key/value heads until they divide (its kv_size_multiplier).
        kv = spread.kv_heads * (spread.nxdt["kv_replicator"] if spread.nxdt else 1)
        assert query % spread.tensor == 0 and kv % spread.tensor == 0, (nodes, spread.tensor)
        tensor.add(spread.tensor)
    hidden = model_shape(w)[3]
    if not tensor and itype == "trn1.32xlarge" and hidden % query:
        return  # NxD Training's Llama refuses a hidden size that is not whole heads (nxd.degree_problems)
    assert tensor, "no layout at any size: the check above never ran"


# Configs the plans below are made from: model sizes, cluster types (Trn2 on its reservation) and node counts that
# reach every sharding the planner emits (DDP, FSDP2, HSDP) with and without tensor parallel.
_PLAN_GRID = [({"model.parameters_billion": str(params), "training.instance_type": itype,
                "training.instance_count": str(nodes), **extra})
              for params in (7, 13, 34, 70) for nodes in (2, 4, 16)
              for itype, extra in (("p5.48xlarge", {}), ("p4d.24xlarge", {}), ("p6-b200.48xlarge", {}),
                                   ("trn2.48xlarge", TRN2))]


def _planned_layouts():
    """(config, layout, the node stack's device) of every preset and grid config the planner plans."""
    from workloads.catalog import load_software
    from workloads.errors import ConfigError

    out = []
    for preset, overrides in [("small", None), ("intermediate", None), ("huge", None), ("huge", TRN2),
                              *(("huge", o) for o in _PLAN_GRID)]:
        try:
            t = plan(load(preset, overrides)).training
        except ConfigError:
            continue
        if t.parallelism is not None:
            out.append(((preset, overrides), t.parallelism, load_software().for_type(_types()[t.instance_type]).device))
    return out


def test_every_layout_the_planner_emits_is_one_the_trainer_accepts():
    """Issue 33: planner output -> trainer accepts, over the presets and a grid of configs; the grid reaches DDP,
    FSDP2 and HSDP, with tensor parallel."""
    from workloads.planning.parallelism import trainer_refusal

    seen = set()
    for where, spread, device in _planned_layouts():
        assert trainer_refusal(spread, device, what="x") is None, where
        seen.add((spread.sharding, spread.tensor > 1))
    assert {("none", False), ("full", False), ("full", True), ("hybrid", False)} <= seen, seen


def test_hsdp_is_chosen_when_the_state_fits_a_node_and_the_inter_node_traffic_drops():
    # 7B on 2 x p5.48xlarge: 112 GB of state fits one node's 8 H100s (14 GB a rank), so FSDP2 shards within the node
    # and the two nodes replicate: only the gradients' all-reduce crosses EFA, not 64 micro-steps of all-gathers.
    from workloads.planning.communication import step

    itype = _types()["p5.48xlarge"]
    spread = choose(parameters_billion=7, layers=32, hidden=4096, heads=32, kv_heads=8, itype=itype, nodes=2)
    assert spread.sharding == "hybrid" and spread.shard_group == 8 and spread.data == 16 and spread.tensor == 1
    assert "HSDP" in spread.reason and "drops from" in spread.reason
    full = replace(spread, sharding="full", shard_group=0)
    hybrid_gb = step(spread, itype, parameters_billion=7, compute_s=1.0).inter_node_gb
    full_gb = step(full, itype, parameters_billion=7, compute_s=1.0).inter_node_gb
    # By hand (gradients reduced in bf16, the trainer's reduce_dtype): full shard: 64 micro-steps x (2 all-gathers of
    # 14 GB + a reduce-scatter of 14 GB), each (15/16) over EFA: 2,520 GB a node; HSDP: 8 replica groups a node each
    # all-reduce 14 GB / 8 over 2 replicas once a step: 8 x 2 x (1/2) x 1.75 = 14 GB.
    assert full_gb == pytest.approx(2520) and hybrid_gb == pytest.approx(14.0)


def test_hsdp_is_not_chosen_where_the_state_fits_no_shard_group():
    # 70B on 16 x p5.48xlarge: 1,120 GB of state exceeds a node; a group of nodes saves no EFA traffic.
    spread = choose(parameters_billion=70, layers=80, hidden=8192, heads=64, kv_heads=8,
                    itype=_types()["p5.48xlarge"], nodes=16)
    assert spread.sharding == "full" and spread.shard_group == 0


def test_a_vocabulary_tensor_parallel_does_not_divide_is_padded_as_megatron_pads_it():
    """Issue 33: an uneven vocabulary under tensor parallel. GPT-2's 50,257 entries on tensor parallel 2 become
    50,432 rows (197 x 128 x 2), and the memory per rank counts the padded logits; a dividing one stays as it is."""
    from workloads.planning.parallelism import LOGIT_BYTES, padded_vocab

    assert padded_vocab(50257, 2) == 50432 and padded_vocab(50257, 16) == 51200 and padded_vocab(257, 2) == 512
    assert padded_vocab(32000, 8) == 32000 and padded_vocab(128256, 8) == 128256 and padded_vocab(50257, 1) == 50257
    args = dict(shards=16, tensor=2, pipeline=1, sharded=True, sequence=4096)
    extra = gib_per_rank(7e9, 32, 4096, vocab=50257, **args) - gib_per_rank(7e9, 32, 4096, vocab=50432 - 2, **args)
    assert extra == pytest.approx(LOGIT_BYTES * 4096 * 2 / 2 / 2**30)  # the last two rows' logits, halved by TP


def test_the_plan_says_where_it_pads_the_vocabulary():
    spread = choose(parameters_billion=175, layers=96, hidden=12288, heads=96, itype=_types()["trn1.32xlarge"],
                    nodes=64, vocab=50257)
    t = spread.tensor
    assert t > 1 and 50257 % t and spread.vocab == 50257
    rows = -(-50257 // (128 * t)) * 128 * t
    assert f"padded to {rows:,} rows (a multiple of 128 x {t}, as Megatron-LM pads them)" in spread.reason
    dividing = choose(parameters_billion=175, layers=96, hidden=12288, heads=96, itype=_types()["trn1.32xlarge"],
                      nodes=64, vocab=51200)
    assert "padded" not in dividing.reason


@pytest.mark.parametrize("billions", [1, 3, 8, 13, 34, 70])
def test_the_trainer_builds_the_decoder_the_plan_sized(billions, tmp_path, monkeypatch):
    """Issue 33 B2: for each usual decoder shape, the layout the planner writes makes examples/slurm/train.py build
    (on the meta device: no memory) a model with exactly the parameters the plan sized memory and time from."""
    import importlib.util
    import json
    import sys
    from dataclasses import asdict
    from pathlib import Path

    import torch

    from workloads.planning.training_layout import choose_layout, trained_billion

    w = load("huge", {"model.parameters_billion": str(billions)})
    spread = next(s for n in (1, 2, 4, 8, 16) if (s := choose_layout(w, _types()["p5.48xlarge"], n)) is not None)
    layout = tmp_path / "layout.json"
    layout.write_text(json.dumps(asdict(spread)))
    trainer = Path(__file__).resolve().parent.parent / "examples" / "slurm" / "train.py"
    spec = importlib.util.spec_from_file_location("train", trainer)
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    monkeypatch.setattr(sys, "argv", ["train.py", "--device", "cpu", "--layout", str(layout),
                                      "--checkpoint-dir", str(tmp_path), "--export-dir", str(tmp_path)])
    args = train.parse()
    with torch.device("meta"):
        model = train.Llama(vocab=args.vocab, layers=args.layers, hidden=args.hidden, heads=args.heads,
                            kv_heads=args.kv_heads, intermediate=args.intermediate, recompute_blocks=False)
    built = sum(p.numel() for p in model.parameters())
    assert spread.intermediate and built == round(trained_billion(w) * 1e9), (built, trained_billion(w))


def test_a_stated_size_the_shape_does_not_have_is_warned_and_the_plan_sizes_the_shape():
    """Issue 33 B2: 405B stated with Llama 3.1 70B's shape (about 69B): the plan sizes memory and time from what the
    trainer builds and says so, naming both sizes. Without model.layers the depth is fitted to the stated size."""
    from workloads.planning.training import plan_training
    from workloads.planning.training_layout import trained_billion

    fitted = load("huge", {"model.parameters_billion": "405"})
    assert abs(trained_billion(fitted) / 405 - 1) < 0.02
    assert not [f for f in plan_training(fitted, load_catalog()).findings if f.field == "model.parameters_billion"]
    w = load("huge", {"model.parameters_billion": "405", "model.layers": "80", "model.hidden_size": "8192"})
    training = plan_training(w, load_catalog())  # training alone: the 405B endpoint is another matter
    warned = [f for f in training.findings if f.field == "model.parameters_billion"]
    assert len(warned) == 1 and warned[0].level == "WARNING", training.findings
    assert "405B stated" in warned[0].message and f"{trained_billion(w):.3g}B" in warned[0].message
    assert training.estimate.flops == pytest.approx(6 * trained_billion(w) * 1e9 * training.estimate.tokens_billion
                                                    * 1e9)
    assert not [f for f in plan(load("huge")).training.findings if f.field == "model.parameters_billion"]


def test_the_activation_constants_are_what_autograd_keeps_for_the_trainers_block():
    """Issue 33 B3: the bytes a train.py block keeps for backward without recompute (bf16 on CPU, saved-tensor hooks:
    tools/activation_bytes.py), re-measured on a small block, within a tenth of the memory model's constants."""
    from tools.activation_bytes import measure
    from workloads.planning.parallelism import (ACTIVATION_ATTENTION_BYTES, ACTIVATION_MLP_BYTES, ACTIVATION_UNSPLIT_BYTES,
                                       layer_activation_bytes)

    kept = measure(hidden=256, heads=4, kv_heads=4, intermediate=896, seq=256)
    for part, constant in (("unsplit", ACTIVATION_UNSPLIT_BYTES), ("attention", ACTIVATION_ATTENTION_BYTES),
                           ("mlp", ACTIVATION_MLP_BYTES)):
        assert abs(kept[part] / constant - 1) <= 0.1, (part, kept[part], constant)
    # Grouped-query attention through SDPA's enable_gqa keeps K/V unexpanded: fewer bytes, so the constant (the
    # full-head figure) is an upper bound there, never an under-estimate.
    gqa = measure(hidden=256, heads=4, kv_heads=1, intermediate=896, seq=256)
    assert gqa["attention"] < kept["attention"] <= ACTIVATION_ATTENTION_BYTES * 1.1
    # Tensor parallel 4 divides attention's and the MLP's share, never the norms'.
    whole, split = layer_activation_bytes(1024, 3584, 1), layer_activation_bytes(1024, 3584, 4)
    assert split == ACTIVATION_UNSPLIT_BYTES * 1024 + (whole - ACTIVATION_UNSPLIT_BYTES * 1024) / 4


def test_a_checkpoint_holds_what_the_plan_sizes_per_parameter():
    """Issue 33 m1: what train.py's checkpoint state holds (Training.state_dict: model and AdamW after a step, the
    trainer's own optimizer), per parameter, is storage's CHECKPOINT_BYTES_PER_PARAM: fp32 weights and two moments."""
    import argparse
    import importlib.util
    from pathlib import Path

    import torch

    from workloads.planning.storage import CHECKPOINT_BYTES_PER_PARAM

    spec = importlib.util.spec_from_file_location("train", Path(__file__).resolve().parent.parent / "examples"
                                                  / "slurm" / "train.py")
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    model = train.Llama(vocab=64, layers=2, hidden=32, heads=4, kv_heads=2, intermediate=64, recompute_blocks=False)
    optimizer = train.optimizer_for(model, argparse.Namespace(lr=1e-3), torch.device("cpu"))
    model(torch.randint(0, 64, (1, 8))).float().sum().backward()
    optimizer.step()
    state = train.Training(model, optimizer, train.LossScale(False)).state_dict()
    tensors = [t for t in torch.utils._pytree.tree_leaves(state) if isinstance(t, torch.Tensor) and t.dim() > 0]
    parameters = sum(p.numel() for p in model.parameters())
    assert sum(t.numel() * t.element_size() for t in tensors) / parameters == CHECKPOINT_BYTES_PER_PARAM


def test_hsdp_is_never_chosen_on_one_node():
    """The ML review (P9): on one node nothing crosses EFA, so HSDP's saving is nil ("from 0 GB to 0 GB") and it only
    adds an all-reduce: full sharding over the node's ranks stays."""
    spread = choose(parameters_billion=8, layers=32, hidden=4096, heads=32, kv_heads=8,
                    itype=_types()["p5.48xlarge"], nodes=1)
    assert spread.sharding in ("full", "none") and "HSDP" not in spread.reason


PIPELINE_EXAMPLE = "examples/workloads/long-context-pipeline.yaml"


def test_the_first_pipeline_stage_keeps_1f1bs_micro_batches_in_flight_and_the_last_the_logits():
    """Issue 42: under 1F1B the first stage runs one forward per stage before its first backward (torch's
    Schedule1F1B: warmup_chunks = stages - stage index), so it keeps `pipeline` micro-batches' activations of its
    layers, about the unsplit model's one; only the last stage holds the logits. Splitting the layers pays where the
    logits are what does not fit, not for the activations (before: the plan divided them by the stages)."""
    shape = dict(shards=32, tensor=8, sharded=True, sequence=65536, recompute=True, intermediate=14336)
    for vocab in (256, 128256):
        one, two = (gib_per_rank(8e9, 32, 4096, pipeline=p, vocab=vocab, **shape) for p in (1, 2))
        if vocab == 256:  # no logits to speak of: two stages keep what one does
            assert two == pytest.approx(one, rel=0.02), (one, two)
        else:  # 15.7 GiB of logits a rank, on the last stage alone, beside half the layers' 16 GiB of inputs
            assert one - two == pytest.approx(8, abs=0.1), (one, two)


def test_the_long_context_example_plans_pipeline_stages_the_trainer_runs(tmp_path, monkeypatch):
    """Llama 3.1 8B at a 64k context on 4 x p4d: FSDP2 with tensor parallel 8 does not fit its logits, two pipeline
    stages across the nodes do; the layout the nodes get carries the degree and the trainer reads it (1F1B over the
    step's micro-batches, as the plan says)."""
    import importlib.util
    import json

    from workloads.planning.parallelism import trainer_refusal

    spread = plan(load(PIPELINE_EXAMPLE)).training.parallelism
    assert (spread.pipeline, spread.tensor, spread.data, spread.sharding) == (2, 8, 2, "full"), spread
    micro = spread.global_batch // (spread.data * spread.micro_batch)
    assert f"the stages run 1F1B over the step's {micro} micro-batches" in spread.reason and micro >= 2
    assert trainer_refusal(spread, "cuda", what="x") is None
    assert gib_per_rank(8e9, 32, 4096, shards=32, tensor=8, pipeline=1, sharded=True, vocab=128256,
                        sequence=65536, intermediate=14336) > 0.85 * spread.rank_memory_gib  # why the stages
    layout = tmp_path / "layout.json"
    layout.write_text(spread.as_json())
    trainer = ROOT / "examples" / "slurm" / "train.py"
    spec = importlib.util.spec_from_file_location("train", trainer)
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    monkeypatch.setattr("sys.argv", ["train.py", "--device", "cuda", "--layout", str(layout), "--checkpoint-dir",
                                     str(tmp_path / "c"), "--export-dir", str(tmp_path / "e")])
    args = train.parse()
    assert (args.pipeline, args.tensor, args.sharding, args.layers) == (2, 8, "full", 32)
    assert json.loads(layout.read_text())["pipeline"] == 2


def test_a_pipelined_run_is_timed_with_its_fill_and_drain(monkeypatch):
    """Issue 42: with m micro-batches through p stages each stage idles p - 1 micro-batch times a step (Narayanan et
    al. 2021, bubble fraction (p - 1) / m): the long-context example's 2 stages and 32 micro-batches take 33/32 of
    the step's compute and communication, in its hours and its layout line."""
    from workloads.catalog import load_catalog as catalog
    from workloads.planning import parallelism, training_layout

    w = load(PIPELINE_EXAMPLE)
    spread = plan(w).training.parallelism
    assert parallelism.pipeline_bubble(spread) == pytest.approx(33 / 32)
    assert "each stage idle 1 of 33 micro-batch times a step" in spread.reason and "x1.031" in spread.reason
    itype = catalog().types["p4d.24xlarge"]
    timed = training_layout.run_hours(w, itype, 4, 1e21, 0.3, None)
    monkeypatch.setattr(parallelism, "pipeline_bubble", lambda s: 1.0)
    assert timed == pytest.approx(training_layout.run_hours(w, itype, 4, 1e21, 0.3, None) * 33 / 32)
