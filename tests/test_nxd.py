"""Trn1/Trn1n train every decoder the catalog holds (issue 40): beyond data parallel, NxD Training's layout, chosen by
the GPU layouts' memory model, with degrees NxD accepts, estimated from Neuron's published throughput, launched with a
config whose structure is AWS's published one (tests/fixtures/nxdt, with repository, path and commit)."""

from __future__ import annotations

import csv
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from workloads import load, plan
from workloads.catalog import devices, load_catalog
from workloads.planning import nxd
from workloads.planning.parallelism import MEMORY_FRACTION
from workloads.planning.train_commands import NXDT_SCRIPT, slurm_submit, tokens_dir
from workloads.planning.training_layout import trained_billion

from .conftest import ROOT, VARIANTS

FIXTURES = ROOT / "tests" / "fixtures" / "nxdt"
SOURCES = yaml.safe_load((FIXTURES / "SOURCES.yaml").read_text())
PUBLISHED_70B = yaml.safe_load((FIXTURES / "hf_llama3_70B_config.yaml").read_text())
PUBLISHED_8B = yaml.safe_load((FIXTURES / "hf_llama3_8B_config.yaml").read_text())
# The plans the issue names, and the same model on trn1n and on HyperPod.
NXD_PLANS = {
    "huge-trn1": ("huge", {"training.instance_type": "trn1.32xlarge"}),
    "huge-trn1n": ("huge", {"training.instance_type": "trn1n.32xlarge"}),
    "huge-hyperpod-trn1": ("huge", {"training.orchestrator": "hyperpod", "training.instance_type": "trn1.32xlarge"}),
    "intermediate-trn1-slurm": ("intermediate", {"training.instance_type": "trn1.32xlarge",
                                                 "training.orchestrator": "slurm"}),
}


def _plan(name: str):
    return plan(load(*NXD_PLANS[name]))


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workloads", "plan", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


# ---------------------------------------------------------------- the plans the issue names

@pytest.mark.parametrize("args", [
    ["huge", "-c", "training.instance_type=trn1.32xlarge"],
    ["intermediate", "-c", "training.instance_type=trn1.32xlarge", "-c", "training.orchestrator=slurm"],
], ids=["huge", "intermediate-slurm"])
def test_trn1_plans_a_tensor_parallel_nxd_layout_and_strict_refuses_the_legacy_stack(args):
    done = _cli(*args, "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    shown = json.loads(done.stdout)
    layout = shown["training"]["parallelism"]
    assert layout["sharding"] == "zero1" and layout["tensor"] > 1 and layout["nxdt"]["sequence_parallel"]
    assert "Neuron's published NxD Training throughput" in shown["estimates"]["basis"]
    assert any(nxd.LEGACY in w["message"] for w in shown["warnings"])
    strict = _cli(*args, "--strict")
    assert strict.returncode == 2 and "Traceback" not in strict.stderr
    assert "NxD Training on Neuron 2.28" in strict.stderr and "refused under strict" in strict.stderr


def test_a_model_data_parallel_holds_keeps_the_shipped_trainer():
    """The 0.5B variant fits DDP on a NeuronCore: train.py trains it, no NxD layout, no NxD warning."""
    p = plan(load(*VARIANTS["huge-trn1"]))
    assert p.training.parallelism.sharding == "none" and p.training.parallelism.nxdt is None
    assert "nxdt" not in json.loads(p.training.parallelism.as_json())
    assert not [f for f in p.training.findings if nxd.LEGACY in f.message]


# ---------------------------------------------------------------- NxD's own rules

def test_the_published_layouts_pass_the_rules_and_their_kv_replication_is_ours():
    script = SOURCES["launch_scripts"]["run_llama2_70B_tp_pp.sh"]
    m = script["model"]
    assert nxd.kv_replicator(m["kv_heads"], script["tensor_parallel"]) == script["kv_replicator"]
    for nodes in (16, 32):
        ranks = script["processes_per_node"] * nodes
        assert nxd.degree_problems(heads=m["heads"], kv_heads=m["kv_heads"], hidden=m["hidden"],
                                   intermediate=28672, layers=m["layers"], sequence=script["sequence"],
                                   tensor=script["tensor_parallel"], pipeline=script["pipeline_parallel"], ranks=ranks,
                                   ranks_per_node=32, global_batch=script["global_batch"]) == []
    for published in (PUBLISHED_70B, PUBLISHED_8B):  # both Llama 3 shapes: 8 KV heads, replicated 4x at TP 32
        d = published["distributed_strategy"]
        assert nxd.kv_replicator(8, d["tensor_model_parallel_size"]) == d["kv_replicator"]
    for row in nxd.load_nxd().throughput:  # the benchmarked runs' world sizes
        assert row.tensor * row.pipeline * row.data == row.nodes * 32


@pytest.mark.parametrize("change, words", [
    ({"heads": 24, "tensor": 32}, "does not divide the 24 attention heads"),
    ({"pipeline": 3}, "does not divide the 80 layers"),
    ({"ranks": 480}, "not divisible by tensor"),
    ({"tensor": 64}, "does not fit a node's 32 NeuronCores"),
    ({"sequence": 4100}, "sequence parallel"),
    ({"global_batch": 1023}, "whole number of micro-batches"),
])
def test_degrees_nxd_refuses_are_named(change, words):
    args = dict(heads=64, kv_heads=8, hidden=8192, intermediate=28672, layers=80, sequence=4096, tensor=32,
                pipeline=8, ranks=512, ranks_per_node=32, global_batch=1024)
    assert nxd.degree_problems(**args) == []
    assert any(words in p for p in nxd.degree_problems(**{**args, **change}))


@pytest.mark.parametrize("name", list(NXD_PLANS))
def test_the_chosen_layout_obeys_nxds_rules_and_is_the_smallest_that_fits(name):
    p = _plan(name)
    t, s = p.training, p.training.parallelism
    itype = load_catalog().get(t.instance_type)
    per_node, core_gib = devices(itype)
    assert s.ranks == t.instance_count * per_node == s.tensor * s.pipeline * s.data
    assert nxd.degree_problems(heads=s.heads, kv_heads=s.kv_heads, hidden=s.hidden, intermediate=s.intermediate,
                               layers=s.layers, sequence=s.sequence, tensor=s.tensor, pipeline=s.pipeline,
                               ranks=s.ranks, ranks_per_node=per_node, global_batch=s.global_batch) == []
    assert s.gib_per_rank <= core_gib * MEMORY_FRACTION
    # No layout with fewer model-parallel ranks fits (NxD accepts it, memory refuses it).
    params = trained_billion(p.workload)
    run = nxd.published_run(itype, params)  # a model of a published run's size: at least that run's degrees
    for tp in (1, 2, 4, 8, 16, 32):
        for pp in range(1, s.layers + 1):
            if tp * pp >= s.tensor * s.pipeline or s.ranks % (tp * pp):
                continue
            if run is not None and (tp < run.tensor or pp < run.pipeline):
                continue
            data = s.ranks // (tp * pp)
            if nxd.degree_problems(heads=s.heads, kv_heads=s.kv_heads, hidden=s.hidden, intermediate=s.intermediate,
                                   layers=s.layers, sequence=s.sequence, tensor=tp, pipeline=pp, ranks=s.ranks,
                                   ranks_per_node=per_node):
                continue
            steps = max(1, round(s.global_batch / data))
            least = nxd.gib_per_core(params * 1e9, layers=s.layers, hidden=s.hidden, intermediate=s.intermediate,
                                     vocab=s.vocab, sequence=s.sequence, tensor=tp, pipeline=pp, data=data,
                                     recompute=nxd.RECOMPUTE[-1], micro_steps=steps)
            assert least > core_gib * MEMORY_FRACTION, (tp, pp)


def test_a_model_of_a_published_runs_size_takes_its_degrees_and_says_so():
    """The 70B model on trn1 is the size of Neuron's published Llama 3.1 70B run (TP 32 PP 8), the run its estimate
    rests on: it takes those degrees, not the shallower pipeline that would fit, and the layout line says whose they
    are. Where the node count rules them out, the line says the estimate was measured at other degrees."""
    for name in ("huge-trn1", "huge-trn1n", "huge-hyperpod-trn1"):
        s = _plan(name).training.parallelism
        assert (s.tensor, s.pipeline) == (32, 8), name
        assert "the degrees of Neuron's llama-3.1-70b run the estimate rests on, TP 32 PP 8" in s.reason
    small = _plan("intermediate-trn1-slurm").training.parallelism  # 3B: no published run of its size
    assert "published" not in small.reason and small.tensor * small.pipeline < 32
    itype = load_catalog().get("trn1.32xlarge")
    shape = dict(parameters_billion=69.0, layers=80, hidden=8192, heads=64, kv_heads=8, intermediate=28672,
                 vocab=32000, sequence=4096, global_batch_tokens=4 * 2**20, itype=itype)
    odd = nxd.choose(**shape, nodes=12)  # 384 ranks: TP 32 leaves 12 stages, which do not divide 80 layers
    assert odd is not None and odd.pipeline < 8
    assert "NOT the published degrees: the estimate was measured at TP 32 PP 8 (llama-3.1-70b)" in odd.reason


def test_more_recompute_and_more_model_parallel_ranks_need_less_memory():
    base = dict(layers=80, hidden=8192, intermediate=28672, vocab=128256, sequence=8192, data=4, micro_steps=256)
    a, b = (nxd.gib_per_core(70e9, tensor=32, pipeline=8, recompute=r, **base) for r in nxd.RECOMPUTE)
    assert b < a
    assert nxd.gib_per_core(70e9, tensor=32, pipeline=8, recompute=nxd.RECOMPUTE[0], **base) < \
        nxd.gib_per_core(70e9, tensor=16, pipeline=8, recompute=nxd.RECOMPUTE[0], **base)


# ---------------------------------------------------------------- the estimate

def test_the_throughput_rows_are_the_published_csvs():
    with (FIXTURES / "training_data_decoder.csv").open() as f:
        rows = {r["Model"].removesuffix(" pre-training").lower(): r for r in csv.DictReader(f, skipinitialspace=True)}
    for row in nxd.load_nxd().throughput:
        published = rows[row.model]
        topology = dict(part.split("=") for part in published["Topology"].split() if "=" in part)
        assert (row.tensor, row.pipeline, row.data) == (int(topology["TP"]), int(topology["PP"]), int(topology["DP"]))
        assert row.nodes == int(published["Nodes"]) and row.sequence == int(published["Sequence Length"])
        assert row.global_batch == int(published["Globalbatch"])
        assert row.sequences_per_s == float(published["Performance [seq/sec]"])
        assert row.neuron_version == published["Neuron Version"]
        assert set(row.instance_types) == set(published["Instance-Type"].split("/"))


def test_the_estimate_rests_on_the_published_throughput():
    """huge on trn1: the likely utilisation is Llama-3.1-70B's published 7.94 sequences/s, as MFU on 6N, and the
    hours are the plan's FLOPs at it."""
    p = _plan("huge-trn1")
    e, itype = p.training.estimate, load_catalog().get("trn1.32xlarge")
    row = next(r for r in nxd.load_nxd().throughput if r.model == "llama-3.1-70b")
    mfu = 6 * 70.6e9 * 7.94 * 8192 / (32 * itype.peak_tflops * 1e12)
    assert e.utilisation == pytest.approx(mfu) == pytest.approx(row.mfu(itype))
    assert row.tokens_per_s_per_chip(itype) == pytest.approx(7.94 * 8192 / (32 * 16))
    assert e.hours == pytest.approx(e.flops / (itype.peak_tflops * 1e12 * 16 * mfu) / 3600)
    assert "neuron-trn1-training-decoder-csv" in e.basis and "7.94 sequences/s" in e.basis
    source = nxd.load_nxd().sources["neuron-trn1-training-decoder-csv"]
    assert SOURCES["throughput"]["training_data_decoder.csv"]["commit"] in source["url"]


# ---------------------------------------------------------------- the config NxD Training runs

def _shape(value) -> object:
    """A config's key tree with each leaf's type (an int is a float where the other side has a float)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted({_shape(v) for v in value})  # a list of what, whatever its length
    if isinstance(value, str):
        try:
            float(value)
            return "number"  # PyYAML reads 1e-06 as a string; OmegaConf as a float
        except ValueError:
            return "str"
    return "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__


def _differences(ours, published, where="") -> list[str]:
    if isinstance(published, dict):
        if not isinstance(ours, dict):
            return [f"{where}: a section in the published config"]
        out = [f"{where}.{k}: missing" for k in published if k not in ours]
        out += [f"{where}.{k}: not in the published config" for k in ours if k not in published]
        return out + [d for k in published if k in ours for d in _differences(ours[k], published[k], f"{where}.{k}")]
    if published == "NoneType" or ours == "NoneType":  # null where a path or value may stand (explicit_log_dir)
        return []
    return [] if ours == published else [f"{where}: {ours} where the published config has {published}"]


@pytest.mark.parametrize("name", list(NXD_PLANS))
def test_every_generated_config_has_the_published_structure(name):
    config = _plan(name).training.parallelism.nxdt["config"]
    assert _differences(_shape(config), _shape(PUBLISHED_70B)) == []
    missing = [d for d in _differences(_shape(config), _shape(PUBLISHED_8B)) if d.endswith("missing")]
    assert missing == []  # the 8B config's keys too (its scheduler has fewer)
    json.loads(json.dumps(config))  # what layout.json carries


def test_the_published_configs_pass_the_structure_check_and_a_wrong_one_fails():
    assert _differences(_shape(PUBLISHED_70B), _shape(PUBLISHED_70B)) == []
    wrong = json.loads(json.dumps(PUBLISHED_70B))
    wrong["distributed_strategy"]["tensor_parallel"] = wrong["distributed_strategy"].pop("tensor_model_parallel_size")
    wrong["trainer"]["max_steps"] = "30000"
    del wrong["exp_manager"]["checkpoint_callback_params"]
    found = _differences(_shape(wrong), _shape(PUBLISHED_70B))
    assert any("tensor_model_parallel_size: missing" in d for d in found)
    assert any("checkpoint_callback_params: missing" in d for d in found)


@pytest.mark.parametrize("name", list(NXD_PLANS))
def test_the_config_says_what_the_plan_planned(name):
    p = _plan(name)
    t, s = p.training, p.training.parallelism
    c, m = s.nxdt["config"], s.nxdt["model_config"]
    d = c["distributed_strategy"]
    assert (d["tensor_model_parallel_size"], d["pipeline_model_parallel_size"]) == (s.tensor, s.pipeline)
    assert d["zero1"] and d["sequence_parallel"] and d["kv_replicator"] == nxd.kv_replicator(s.kv_heads, s.tensor)
    assert c["trainer"]["devices"] * c["trainer"]["num_nodes"] == s.ranks and c["trainer"]["num_nodes"] == \
        t.instance_count
    assert c["trainer"]["max_steps"] == s.steps and c["model"]["optim"]["sched"]["warmup_steps"] == s.warmup_steps
    assert c["exp_manager"]["checkpoint_callback_params"]["every_n_train_steps"] == s.checkpoint_every
    assert c["exp_manager"]["checkpoint_callback_params"]["save_top_k"] == s.keep_checkpoints
    assert c["data"]["global_batch_size"] == s.global_batch and c["data"]["global_batch_size"] % (
        c["data"]["micro_batch_size"] * s.data) == 0
    assert c["data"]["train_dir"] == tokens_dir(s.export_dir, p.workload.name) + "-nxdt"
    assert (c["model"]["num_layers"], c["model"]["hidden_size"], c["model"]["encoder_seq_length"]) == \
        (s.layers, s.hidden, s.sequence)
    assert (m["num_hidden_layers"], m["hidden_size"], m["num_attention_heads"], m["num_key_value_heads"],
            m["intermediate_size"], m["vocab_size"]) == (s.layers, s.hidden, s.heads, s.kv_heads, s.intermediate,
                                                         s.vocab)
    assert c["model"]["optim"]["lr"] == s.lr and c["model"]["optim"]["sched"]["min_lr"] == pytest.approx(s.lr / 10)
    assert c["exp_manager"]["explicit_log_dir"] == f"/fsx/checkpoints/{p.workload.name}-train"


@pytest.mark.parametrize("name", list(NXD_PLANS))
def test_the_converter_gets_its_own_options_with_the_layouts_degrees(name):
    s = _plan(name).training.parallelism
    args = s.nxdt["convert"]
    options = [a for a in args if a.startswith("--")]
    assert set(options) <= set(SOURCES["converter"]["options"])
    given = dict(zip(args[::1], args[1::1]))
    assert given["--tp_size"] == str(s.tensor) and given["--pp_size"] == str(s.pipeline)
    assert given["--kv_size_multiplier"] == str(s.nxdt["kv_replicator"]) and "--convert_to_full_state" in args


@pytest.mark.parametrize("name", ["huge-trn1", "huge-hyperpod-trn1"])
def test_the_submit_line_names_the_nxd_launcher_with_the_plans_values(name):
    p = _plan(name)
    t, s = p.training, p.training.parallelism
    submit = slurm_submit(workload=p.workload.name, nodes=t.instance_count, accelerator_kind=t.accelerator_kind,
                          parallelism=s, auto_resume=t.orchestrator == "hyperpod")
    words = shlex.split(submit.split("&& ", 2)[-1])
    at = next(i for i, w in enumerate(words) if w.endswith(f"/{NXDT_SCRIPT}"))
    options = dict(w.removeprefix("--").split("=", 1) for w in words[:at] if w.startswith("--") and "=" in w)
    assert options["nodes"] == str(t.instance_count) and options["signal"] == f"TERM@{s.signal_lead_s}"
    args = dict(zip(words[at + 1::2], words[at + 2::2]))
    assert args == {"--data": tokens_dir(s.export_dir, p.workload.name), "--tokenizer": "/fsx/datasets/tokenizer",
                    "--steps": str(s.steps), "--export-dir": s.export_dir}


# ---------------------------------------------------------------- the synthesized clusters

@pytest.mark.parametrize("variant", ["huge-trn1-nxd", "huge-trn1n-nxd"])
def test_the_70b_cluster_on_trn1_has_efa_on_every_card_and_runs_nxd_training(variant, variant_synth_by_name):
    """`cdk synth --all -c workload=huge -c training.instance_type=trn1.32xlarge` (and trn1n): the compute nodes'
    launch template puts EFA on every network card (8 on trn1, 16 on trn1n), the nodes' layout carries the NxD config,
    the Submit output launches NxD Training, and the node image installs it (checked by its pinned versions)."""
    s = variant_synth_by_name(variant)
    itype = load_catalog().get(VARIANTS[variant][1]["training.instance_type"])
    train = s.templates["TrainStack"]
    (template,) = [r["Properties"]["LaunchTemplateData"] for k, r in train["Resources"].items()
                   if r["Type"] == "AWS::EC2::LaunchTemplate" and k.startswith("ComputeTemplate")]
    efa_cards = {n["NetworkCardIndex"] for n in template["NetworkInterfaces"] if n.get("InterfaceType") == "efa-only"}
    assert efa_cards == set(range(itype.network_cards)) and len(efa_cards) == itype.efa_max_interfaces > 0
    text = json.dumps(train)
    p = plan(load(*VARIANTS[variant]))
    assert f"/{NXDT_SCRIPT} " in train["Outputs"]["Submit"]["Value"] and "Calibrate" not in train["Outputs"]
    from .test_cluster_stack import _user_data
    assert p.training.parallelism.as_json() in _user_data(template)  # the layout, with its NxD config, on every node
    pins = nxd.load_nxd().stack["pins"]
    assert "InstallNxdTraining" in text and all(f"{k}=={v}" in text for k, v in pins.items())


def test_the_70b_hyperpod_cluster_on_trn1_gets_the_nxd_layout_and_stack(variant_synth_by_name):
    from constructs_lib.hyperpod_cluster import FRAMEWORK_SCRIPT, LAYOUT_FILE

    s = variant_synth_by_name("huge-hyperpod-trn1-nxd")
    cluster = s.one("TrainStack", "AWS::SageMaker::Cluster")["Properties"]
    (workers,) = [g for g in cluster["InstanceGroups"] if g["InstanceGroupName"] == "workers"]
    assert (workers["InstanceType"], workers["InstanceCount"]) == ("ml.trn1.32xlarge", 16)
    deployment = s.one("TrainStack", "Custom::CDKBucketDeployment")["Properties"]
    shipped = {}
    for key in deployment["SourceObjectKeys"]:
        folder = s.outdir / f"asset.{key.removesuffix('.zip')}"
        shipped.update({f.name: f.read_text() for f in folder.iterdir() if f.is_file()})
    layout = json.loads(shipped[LAYOUT_FILE])
    assert layout["sharding"] == "zero1" and layout["nxdt"]["config"]["distributed_strategy"]["zero1"]
    assert "InstallNxdTraining" in shipped[FRAMEWORK_SCRIPT]
    assert f"/{NXDT_SCRIPT} " in s.templates["TrainStack"]["Outputs"]["Submit"]["Value"]


def test_fsx_holds_the_token_shards_and_nxds_copy_of_them():
    """/fsx/tokens (the prepare step's ids, 2 bytes a token under 65,536 entries) is counted in every cluster plan;
    an NxD plan adds nxdt_data.py's Arrow copy (two ids and a mask byte a token), and its decision says so."""
    from workloads.planning import estimates as est
    from workloads.planning.storage import tokens_gib

    assert tokens_gib(tokens_billion=1, vocab=32000, nxdt=False) == pytest.approx(2e9 / 2**30)
    assert tokens_gib(tokens_billion=1, vocab=32000, nxdt=True) == pytest.approx(7e9 / 2**30)
    assert tokens_gib(tokens_billion=1, vocab=128256, nxdt=True) == pytest.approx(13e9 / 2**30)
    p = _plan("huge-trn1")
    w, t = p.workload, p.training
    per_epoch = est.tokens_billion(w.data.dataset_size_gib, w.data.tokens_billion, 1)
    shards = tokens_gib(tokens_billion=per_epoch, vocab=t.parallelism.vocab, nxdt=True)
    (line,) = [d for d in t.decisions if d.startswith("FSx for Lustre")]
    assert f"{shards:,.0f} GiB of token shards (/fsx/tokens and NxD Training's copy)" in line
    gpu = plan(load("huge")).training
    (line,) = [d for d in gpu.decisions if d.startswith("FSx for Lustre")]
    assert "GiB of token shards (/fsx/tokens)" in line


def test_the_launcher_and_converter_are_said_to_come_from_the_2_26_release():
    """The examples commit is the repository's 2.26.0 release (NxD Training 1.6.0), not the 1.7.0 wheel's: the bake
    step's comment and the plan's WARNING say so."""
    from constructs_lib.node_image import install_nxd_training
    from workloads.catalog import load_software

    stack = nxd.load_nxd().stack
    assert (stack["examples_release"], stack["examples_version"]) == ("2.26.0", "1.6.0")
    assert stack["examples_version"] != stack["pins"]["neuronx_distributed_training"]
    software = next(s for s in load_software().stacks if s.device == "xla")
    (step,) = install_nxd_training(software)
    assert "its launcher and converter from 9169aa03f39efd4eb02da63891a7ed98defb1714: the repository's 2.26.0 " \
           "release (NxD Training 1.6.0)" in step.commands()
    (warning,) = [f for f in _plan("huge-trn1").training.findings if "training_orchestrator.py" in f.message]
    assert "2.26.0 release (NxD Training 1.6.0" in warning.message and "1.7.0 wheel" in warning.message
    assert "9169aa03" in warning.source
