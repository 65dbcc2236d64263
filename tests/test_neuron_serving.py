"""LLMs on Inferentia2 serve on vLLM on Neuron (optimum-neuron 0.4.5, NxD Inference), not TGI on optimum-neuron.

Before: the Neuron path ran TGI 3.3.6 (huggingface-pytorch-tgi-inference ...-optimum3.3.6-neuronx-...), and TGI is in
maintenance mode. The SDK's vLLM-on-Neuron entry stops at optimum-neuron 0.4.4, whose tag is not in AWS's published
data, and it cannot build the URI for an inf2 type at all; the planner pins the published 0.4.5 tag.
"""

from __future__ import annotations

from workloads import load, plan
from workloads.catalog import load_image_support
from workloads.planning.contracts import CONTAINERS, MODEL_DIR, VLLM_NEURON_TAG

from .test_published_images import assert_published, problems


def _neuron(ip):
    return ip.serving.container == "vllm-neuronx"


def test_huge_serves_on_inf2_through_vllm_on_neuron_with_the_export_settings():
    ip = plan(load("huge")).inference["realtime"]
    assert ip.instance_type.startswith("ml.inf2.") and _neuron(ip)
    sv = ip.serving
    env = sv.environment
    assert env == {"SM_ON_MODEL": MODEL_DIR, "SM_ON_TENSOR_PARALLEL_SIZE": str(sv.tensor_parallel),
                   "SM_ON_BATCH_SIZE": str(ip.concurrency),
                   "SM_ON_SEQUENCE_LENGTH": str(load("huge").inference.generation.max_total_tokens)}
    export = next(n for n in sv.notes if "optimum-cli export neuron" in n)
    for flag in (f"--batch_size {env['SM_ON_BATCH_SIZE']}", f"--sequence_length {env['SM_ON_SEQUENCE_LENGTH']}",
                 f"--tensor_parallel_size {env['SM_ON_TENSOR_PARALLEL_SIZE']}", "--instance_type inf2"):
        assert flag in export, (flag, export)
    assert sv.artifact_key.endswith("-neuron/") and not sv.compressed
    assert sv.request.content_type == "application/json" and sv.request.records == "one"


def test_the_image_is_the_published_tag_not_the_sdks():
    from constructs_lib.images import serving_image
    from workloads.commands import image_cache

    for region in ("us-east-1", "us-east-2", "us-west-2"):
        uri = serving_image(container="vllm-neuronx", region=region, instance_type="ml.inf2.48xlarge")
        assert uri.endswith(":" + VLLM_NEURON_TAG)
        assert_published(f"vllm-neuronx in {region}", uri)
    sdk = image_cache.retrieve(region="us-east-2", **dict(CONTAINERS["vllm-neuronx"].image))
    assert problems("the SDK's own", sdk), "the SDK's tag is published now: drop the pin"


def test_no_tgi_container_is_left_and_the_neuron_one_is_supported():
    assert not any("tgi" in key for key in CONTAINERS)
    assert not load_image_support()["vllm-neuronx"].problem("2026-11-25")
