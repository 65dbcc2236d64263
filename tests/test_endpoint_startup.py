"""Endpoint variants get the time and room their model needs to start (issue 22, item 6).

The ranges come from the SageMaker API model botocore ships (sagemaker 2017-07-24, shapes
ProductionVariantVolumeSizeInGB, ProductionVariantModelDataDownloadTimeoutInSeconds and
ProductionVariantContainerStartupHealthCheckTimeoutInSeconds), not from workloads/planning/startup.py; which types take a
VolumeSizeInGB comes from the catalog's sourced local_nvme (no EBS gp2 ML volume on NVMe types).
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import botocore
import pytest

from workloads import ConfigError, load, plan
from workloads.planning import estimates as est
from workloads.catalog import load_catalog

from .conftest import SERVING_VARIANTS, VARIANTS

FIELDS = {"VolumeSizeInGB": "ProductionVariantVolumeSizeInGB",
          "ModelDataDownloadTimeoutInSeconds": "ProductionVariantModelDataDownloadTimeoutInSeconds",
          "ContainerStartupHealthCheckTimeoutInSeconds": "ProductionVariantContainerStartupHealthCheckTimeoutInSeconds"}
DEFAULT_HEALTH_CHECK_S = 240  # "during the 4 minutes after startup" (Use Your Own Inference Code with Hosting Services)


@cache
def documented_range(field: str) -> tuple[int, int]:
    models = Path(botocore.__file__).parent / "data" / "sagemaker"
    path = sorted(models.glob("*/service-2.json*"))[-1]
    data = json.loads(gzip.open(path).read() if path.suffix == ".gz" else path.read_text())
    shape = data["shapes"][FIELDS[field]]
    return shape["min"], shape["max"]


def _variants(template: dict) -> list[dict]:
    """Each instance variant with its timeouts: a component endpoint's are its inference component's
    StartupParameters (the variant names no model)."""
    startup = [c["Properties"]["Specification"]["StartupParameters"] for c in template["Resources"].values()
               if c["Type"] == "AWS::SageMaker::InferenceComponent"]
    return [{**v, **(startup[0] if "ModelName" not in v and startup else {})}
            for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::EndpointConfig"
            for v in r["Properties"]["ProductionVariants"] if "InstanceType" in v]


@pytest.mark.parametrize("variant", SERVING_VARIANTS)
def test_every_instance_variant_has_timeouts_and_a_volume_in_range(synth, variant):
    workload, overrides = VARIANTS[variant]
    cat = load_catalog()
    params = load(workload, overrides).model.parameters_billion
    problems = []
    for v in _variants(synth(workload, overrides).templates["InferenceStack"]):
        itype = cat.types[v["InstanceType"].removeprefix("ml.")]
        for field in FIELDS:
            low, high = documented_range(field)
            value = v.get(field)
            if field == "VolumeSizeInGB" and itype.local_nvme:
                if value is not None:
                    problems.append(f"{itype.name}: VolumeSizeInGB on a type with NVMe instance storage")
                continue
            if value is None or not low <= value <= high:
                problems.append(f"{itype.name}: {field} {value} outside {low}-{high}")
        weights_gb = params * (est.SERVE_BYTES_PER_PARAM if itype.accelerator else est.CPU_BYTES_PER_PARAM)
        if not itype.local_nvme and v.get("VolumeSizeInGB", 0) < weights_gb:
            problems.append(f"{itype.name}: a {v.get('VolumeSizeInGB')} GB volume cannot hold {weights_gb:g} GB")
        for field in ("ModelDataDownloadTimeoutInSeconds", "ContainerStartupHealthCheckTimeoutInSeconds"):
            if v.get(field, 0) < DEFAULT_HEALTH_CHECK_S:
                problems.append(f"{itype.name}: {field} below SageMaker's own 4-minute start-up window")
    assert not problems, "\n".join(problems)


def test_a_70b_model_gets_more_than_the_defaults_and_the_plan_shows_why():
    rt = plan(load("huge")).inference["realtime"]
    st = rt.startup
    assert st.model_gb == 140 and st.volume_gb >= 140  # 70e9 x 2 B on inf2 (EBS only)
    assert st.download_timeout_s > DEFAULT_HEALTH_CHECK_S and st.startup_timeout_s > DEFAULT_HEALTH_CHECK_S
    assert "assumptions" in st.basis and "GB/s" in st.basis


@pytest.mark.parametrize("params, itype, compressed, field, limit", [
    # 600 GB of weights: a download estimated past the documented 3600 s maximum.
    (300, "inf2.48xlarge", False, "model.parameters_billion", "ModelDataDownloadTimeoutInSeconds"),
    # 254 GB of fp32 weights in a model.tar.gz on an EBS-only type: archive + extracted exceed the 512 GB volume.
    (63.5, "m5.4xlarge", True, "inference.realtime.instance_type", "VolumeSizeInGB"),
])
def test_a_model_past_a_documented_limit_is_refused_with_the_field(params, itype, compressed, field, limit):
    from workloads.planning.startup import plan_startup

    with pytest.raises(ConfigError) as err:
        plan_startup("realtime", params, load_catalog().types[itype], compressed=compressed)
    assert err.value.field == field and str(documented_range(limit)[1]) in str(err.value), str(err.value)


@pytest.mark.parametrize("workload", ["intermediate", "examples/workloads/serving/chat-7b.yaml",
                                      "examples/workloads/serving/chat-13b.yaml"])
def test_a_vllm_endpoint_waits_for_the_engines_compilation(workload):
    """The outside review (R4): a vLLM copy must pass its ping within ContainerStartupHealthCheckTimeoutInSeconds,
    and vLLM compiles the model before it answers; 240 s was too tight. Every vLLM real-time and async endpoint
    allows the load plus the engine's compilation, with the margin, and says so."""
    from workloads.planning.startup import MARGIN, VLLM_ENGINE_WARMUP_S

    p = plan(load(workload))
    served = [ip for kind, ip in p.inference.items() if kind in ("realtime", "async") and ip.serving
              and ip.serving.container == "vllm"]
    assert served, workload
    for ip in served:
        assert ip.startup.startup_timeout_s >= MARGIN * VLLM_ENGINE_WARMUP_S
        assert "engine's compilation" in ip.startup.basis
