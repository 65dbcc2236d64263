"""vLLM on Neuron is sized per NeuronCore with the heads NxD Inference adds, and hosted as the published deployments
host it (catalog/neuron_serving.yaml).

Before: a 70B model was planned on ml.inf2.24xlarge at tensor parallel 12, batch 32 x 4096, counted as 12 "devices"
holding weights and an 8-KV-head cache. NxD Inference converts that model to multi-head attention at degree 12 (12 is
not a multiple of its 8 KV heads): 72 KV heads, 9 times the cache, far beyond a 16 GiB core. The published 70B
deployment is ml.inf2.48xlarge on 24 cores. The variant allowed 560 s to become healthy on a 150 GB volume with
SageMaker's default host AMI, where the published deployment allows 3600 s on 512 GB with the Neuron AMI.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import botocore
import pytest

from workloads import load, plan
from workloads.catalog import devices, load_catalog
from workloads.planning import neuron_hosting, neuron_memory
from workloads.planning.contracts import SERVING_MEMORY_FRACTION, neuron_holds
from workloads.planning.startup import TIMEOUT_RANGE_S, VOLUME_RANGE_GB, plan_startup

from .conftest import VARIANTS

MODEL = Path(botocore.__file__).parent / "data" / "sagemaker" / "2017-07-24" / "service-2.json.gz"


def _shapes():
    return json.loads(gzip.open(MODEL).read())["shapes"]


def _neuron_plans():
    """(name, plan) of every shipped workload with a vLLM-on-Neuron endpoint."""
    from constructs_lib.images import shipped_plans

    out = [(p.workload.name, p) for p in shipped_plans()
           if any(ip.serving and ip.serving.container == "vllm-neuronx" for ip in p.inference.values())]
    assert out, "no shipped workload serves on Neuron: the walk found none"
    return out


@pytest.mark.parametrize("degree, heads, kv_heads, expected", [
    (32, 56, 8, (64, 32)),  # gqa.py's own example: replicate to the degree, query heads padded
    (24, 64, 8, (72, 24)),  # Llama 70B on inf2.48xlarge: 8 KV heads replicated 3 times
    (12, 64, 8, (72, 72)),  # 12 is not a multiple of 8: converted to multi-head attention
    (8, 64, 8, (64, 8)),    # one KV head a rank as it is
    (4, 32, 32, (32, 32)),  # multi-head attention stays so
    (2, 64, 8, (64, 8)),    # 4 KV heads a rank
])
def test_heads_are_sharded_as_nxd_inference_shards_them(degree, heads, kv_heads, expected):
    assert neuron_memory.head_counts(degree, heads, kv_heads) == expected


def test_every_shipped_neuron_endpoint_fits_each_core():
    for name, p in _neuron_plans():
        for kind, ip in p.inference.items():
            if not (ip.serving and ip.serving.container == "vllm-neuronx"):
                continue
            env, w = ip.serving.environment, p.workload
            degree, batch = int(env["SM_ON_TENSOR_PARALLEL_SIZE"]), int(env["SM_ON_BATCH_SIZE"])
            itype = load_catalog().types[ip.instance_type.removeprefix("ml.")]
            count, per_core = devices(itype)
            assert count % degree == 0, (name, kind, degree, count)
            used = neuron_memory.per_core_gib(w, degree, batch)
            assert used <= per_core * SERVING_MEMORY_FRACTION, \
                f"{name} {kind}: {used:.1f} GiB a NeuronCore on {ip.instance_type} at TP {degree}, batch {batch}"
            assert int(env["SM_ON_SEQUENCE_LENGTH"]) == w.inference.generation.max_total_tokens


def test_the_70b_preset_lands_where_the_published_deployment_does():
    ip = plan(load("huge")).inference["realtime"]
    shape = neuron_hosting.facts()["sagemaker"]["published_shapes"][0]
    assert ip.instance_type == "ml." + shape["instance"]
    assert ip.serving.tensor_parallel == shape["tensor_parallel"]


def test_the_published_70b_shapes_fit_and_the_old_one_does_not():
    """The rule admits what Hugging Face compiles and serves, and refuses TP 12 x batch 32 on inf2.24xlarge."""
    types = load_catalog().types
    for shape in neuron_hosting.facts()["sagemaker"]["published_shapes"]:
        w = load("huge", {"model.parameters_billion": str(shape["parameters_billion"]),
                          "inference.generation.max_total_tokens": str(shape["sequence_length"])})
        for batch in shape["batch_sizes"]:
            assert neuron_holds(w, types[shape["instance"]], shape["tensor_parallel"], batch), batch
    w = load("huge")
    assert not neuron_holds(w, types["inf2.24xlarge"], 12, 32)


def test_the_neuron_ami_is_in_the_api_and_named_for_inferentia():
    ami = neuron_hosting.inference_ami()
    assert ami in _shapes()["ProductionVariantInferenceAmiVersion"]["enum"]
    doc = " ".join(_shapes()["ProductionVariant"]["members"]["InferenceAmiVersion"]["documentation"].split())
    after = doc.split(f"<dt>{ami}</dt>", 1)[1]
    assert "Inferentia2" in after.split("</dd>", 1)[0]


def test_the_recorded_limits_are_the_apis():
    members = _shapes()["ProductionVariant"]["members"]
    for field, (low, high) in (("ContainerStartupHealthCheckTimeoutInSeconds", TIMEOUT_RANGE_S),
                               ("VolumeSizeInGB", VOLUME_RANGE_GB)):
        shape = _shapes()[members[field]["shape"]]
        assert (shape["min"], shape["max"]) == (low, high), field


def test_neuron_startup_follows_the_published_deployments():
    deployments = neuron_hosting.deployments()
    floor = next(d for d in deployments if not d.parameters_billion)
    sized = next(d for d in deployments if d.parameters_billion)
    for params in (1, 8, 70, sized.parameters_billion):
        st = plan_startup("realtime", params, load_catalog().types["inf2.48xlarge"], compressed=False)
        assert st.startup_timeout_s >= floor.startup_timeout_s and st.volume_gb >= floor.volume_gb
        assert st.startup_timeout_s <= TIMEOUT_RANGE_S[1] and st.volume_gb <= VOLUME_RANGE_GB[1]
        if params == sized.parameters_billion:
            assert (st.startup_timeout_s, st.volume_gb) == (sized.startup_timeout_s, sized.volume_gb)


@pytest.mark.parametrize("variant", ["huge"])
def test_the_neuron_variant_is_hosted_as_published(synth, variant):
    workload, overrides = VARIANTS[variant]
    template = synth(workload, overrides).templates["InferenceStack"]
    p = plan(load(workload, overrides or {}))
    ip = p.inference["realtime"]
    assert ip.serving.container == "vllm-neuronx"
    configs = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::EndpointConfig"]
    variants = [v for r in configs for v in r["Properties"]["ProductionVariants"]
                if v.get("InstanceType", "").startswith("ml.inf2.")]
    assert variants, "no Inferentia variant synthesized"
    sized = next(d for d in neuron_hosting.deployments() if d.parameters_billion)
    for v in variants:
        assert v["InferenceAmiVersion"] == neuron_hosting.inference_ami()
        assert v["ContainerStartupHealthCheckTimeoutInSeconds"] == ip.startup.startup_timeout_s
        assert v["VolumeSizeInGB"] == ip.startup.volume_gb
        # A 70B model: within 1% of the published 70.6B deployment's figures.
        assert v["ContainerStartupHealthCheckTimeoutInSeconds"] >= 0.99 * sized.startup_timeout_s
        assert v["VolumeSizeInGB"] >= 0.99 * sized.volume_gb


def test_every_shipped_neuron_plan_names_the_neuron_host():
    for name, p in _neuron_plans():
        for kind, ip in p.inference.items():
            if ip.serving and ip.serving.container == "vllm-neuronx" and kind != "batch":
                assert ip.serving.inference_ami_version == neuron_hosting.inference_ami(), (name, kind)


def _largest_published_batch_at_least(parameters_billion: float, instance: str) -> int:
    """The table read afresh: the nearest published model at least this large (the largest above them all)."""
    shapes = [s for s in neuron_hosting.facts()["sagemaker"]["published_shapes"] if s["instance"] == instance] or \
        neuron_hosting.facts()["sagemaker"]["published_shapes"]
    larger = sorted((s for s in shapes if s["parameters_billion"] >= parameters_billion),
                    key=lambda s: s["parameters_billion"])
    return max((larger[0] if larger else max(shapes, key=lambda s: s["parameters_billion"]))["batch_sizes"])


@pytest.mark.parametrize("overrides", [None, {"inference.realtime.max_instances": "8",
                                              "inference.requests_per_second": "6"},
                                       {"model.parameters_billion": "8", "inference.realtime.max_instances": "8"}])
def test_a_neuron_batch_is_at_most_the_largest_published_for_its_size(overrides):
    """NxD Inference compiles the batch: optimum-neuron publishes a 70B on inf2.48xlarge at batch 1, 4 and 8 (its page
    once listed 16-48 and was corrected), an 8B at up to 48. Every planned Neuron endpoint's SM_ON_BATCH_SIZE is at
    most the published batch for its size, its throughput is priced at that batch, and the fleet at the peak still
    covers the stated rate (more instances where the smaller batch serves less). Before: huge compiled batch 32 from
    a 7B page."""
    w = load("huge", overrides)
    p = plan(w)
    ip = p.inference["realtime"]
    assert ip.serving.container == "vllm-neuronx"
    batch = int(ip.serving.environment["SM_ON_BATCH_SIZE"])
    cap = _largest_published_batch_at_least(w.model.parameters_billion, ip.instance_type.removeprefix("ml."))
    assert batch == ip.concurrency and 1 <= batch <= cap, (batch, cap)
    assert f"--batch_size {batch} " in " ".join(ip.serving.notes)
    assert "largest batch published" in ip.throughput_basis
    peak = ip.instances_needed_at_peak
    assert peak * ip.requests_per_second_per_instance >= w.inference.requests_per_second
    assert (peak - 1) * ip.requests_per_second_per_instance < w.inference.requests_per_second
    assert ip.max_instances >= peak


def test_every_shipped_neuron_endpoint_compiles_a_published_batch():
    for name, p in _neuron_plans():
        for kind, ip in p.inference.items():
            if ip.serving and ip.serving.container == "vllm-neuronx":
                batch = int(ip.serving.environment["SM_ON_BATCH_SIZE"])
                cap = _largest_published_batch_at_least(p.workload.model.parameters_billion,
                                                        ip.instance_type.removeprefix("ml."))
                assert batch <= cap, (name, kind, batch, cap)
