"""PyTorch models that are not LLMs serve on AWS's Ray Serve DLC, not on the PyTorch 2.6 TorchServe image.

Before: every framework archive of a PyTorch model got pytorch-inference:2.6 (TorchServe), past its end of patch on
2026-06-30 (DLC Framework Support Policy); the PyTorch images since are "not configured for serving" and point to
the vLLM, vLLM-Omni or Ray DLCs (aws/deep-learning-containers docs/pytorch/deployment/sagemaker.md). The Ray image's
GPU build needs a host AMI other than SageMaker's default (docs/ray/deployment/sagemaker.md).
"""

from __future__ import annotations

import pytest

from workloads import load, plan
from workloads.catalog import load_image_support
from workloads.planning.contracts import CONTAINERS, RAY_APP

GPU_HOST_AMI = "al2-ami-sagemaker-inference-gpu-3-1"  # docs/ray/deployment/sagemaker.md

from .conftest import ROOT
from .test_published_images import assert_published

VISION = str(ROOT / "examples" / "workloads" / "vision-classifier.yaml")


def test_a_vision_model_is_served_by_ray_serve_with_its_application_and_host():
    p = plan(load(VISION))
    for kind, ip in p.inference.items():
        sv = ip.serving
        assert sv.container == "ray-serve", kind
        assert sv.environment == {"SM_RAYSERVE_APP": RAY_APP}
        assert sv.request.content_type == "application/json" and sv.request.records == "one"
        assert sv.compressed and "Ray Serve application" in sv.artifact_layout
        gpu = ip.accelerator_kind == "nvidia-gpu"
        assert sv.inference_ami_version == (GPU_HOST_AMI if gpu else None), kind


def test_on_cpu_no_host_ami_is_asked():
    ip = plan(load(VISION, {"inference.realtime.instance_type": "ml.c6i.4xlarge", "inference.latency_ms": 20000,
                            "inference.requests_per_second": 0.1})).inference["realtime"]
    assert ip.serving.container == "ray-serve" and ip.serving.inference_ami_version is None


def test_batch_on_a_gpu_names_the_transform_host_whose_driver_runs_the_image():
    """Before: refused (no TransformAmiVersion was set). The Ray DLC's GPU build is CUDA 12.9, which the batch host's
    driver 535 runs (NVIDIA minor version compatibility; tests/test_hosts.py)."""
    batch = plan(load(VISION, {"inference.batch.instance_type": "ml.g5.xlarge"})).inference["batch"]
    assert batch.serving.container == "ray-serve" and batch.serving.transform_ami_version == "al2-ami-sagemaker-batch-gpu-535"
    cpu = plan(load(VISION, {"inference.batch.instance_type": "ml.c6i.xlarge"})).inference["batch"]
    assert cpu.serving.transform_ami_version is None


def test_the_ray_image_is_published_and_supported():
    from constructs_lib.images import serving_image

    for itype in (None, "ml.c6i.xlarge", "ml.g5.xlarge"):
        uri = serving_image(container="ray-serve", region="us-west-2", instance_type=itype)
        assert_published(f"ray-serve on {itype}", uri)
    assert not load_image_support()["ray-serve"].problem("2026-11-25")
    assert "pytorch" not in CONTAINERS  # the TorchServe image is no longer a choice


def test_the_endpoints_ask_for_the_host_ami_on_gpu(synth):
    s = synth(VISION)
    configs = s.resources("InferenceStack", "AWS::SageMaker::EndpointConfig")
    variants = [v for r in configs.values() for v in r["Properties"]["ProductionVariants"]]
    assert variants and all(v.get("InferenceAmiVersion") == GPU_HOST_AMI for v in variants)
    images = {r["Properties"]["PrimaryContainer"]["Image"]
              for r in s.resources("InferenceStack", "AWS::SageMaker::Model").values()}
    assert images and all("/ray:serve-ml-sagemaker-cuda-v1.4" in i for i in images)
