"""FP8 serving candidates (issue 41): vLLM's FP8 weights and KV cache where the GPU computes in FP8 and the container
documents the flags, at 1 byte a parameter and half the cache's bytes, marked in the table, warned when chosen, and
carried to the endpoint's container environment. Expectations read catalog/serving_fp8.yaml."""

from __future__ import annotations

import pytest

from workloads import ConfigError, load, plan
from workloads.catalog import load_catalog
from workloads.planning import speed
from workloads.planning.contracts import kv_bytes_per_token, weights_gib
from workloads.planning.fp8_serving import CHECKPOINT, FP8, load_fp8, named, supports_fp8

from .conftest import ROOT

CAT = load_catalog()
CHAT_7B = str(ROOT / "examples" / "workloads" / "serving" / "chat-7b.yaml")
GPUS = sorted({t.accelerator.model for t in CAT.types.values() if t.accelerator and t.accelerator.kind == "nvidia-gpu"})


def _flag(env_key: str) -> str:
    """The vLLM DLC's translation (aws/deep-learning-containers sagemaker_args.py flag_for, recorded in the catalog's
    dlc-vllm-sagemaker-args source): SM_VLLM_KV_CACHE_DTYPE -> --kv-cache-dtype."""
    return "--" + env_key.removeprefix("SM_VLLM_").lower().replace("_", "-")


def test_every_catalog_gpu_has_a_compute_capability_and_fp8_is_offered_from_8_9():
    f = load_fp8()
    assert set(GPUS) <= set(f.compute_capability), set(GPUS) - set(f.compute_capability)
    for t in CAT.types.values():
        if t.accelerator and t.accelerator.kind == "nvidia-gpu":
            assert supports_fp8(t) == (f.compute_capability[t.accelerator.model] >= f.min_compute_capability), t.name
    by_model = {t.accelerator.model: supports_fp8(t) for t in CAT.types.values() if t.accelerator}
    assert by_model["NVIDIA L4"] and by_model["NVIDIA H100 80GB"] and by_model["NVIDIA H200"]
    assert not any(by_model[m] for m in ("NVIDIA A10G", "NVIDIA A100 40GB", "NVIDIA T4", "Inferentia2"))


def test_the_flags_are_the_ones_vllm_documents():
    env = dict(load_fp8().fmt.environment)
    assert {_flag(k): v for k, v in env.items()} == {"--quantization": "fp8", "--kv-cache-dtype": "fp8"}
    for key in ("vllm-fp8", "vllm-kv-cache-fp8", "dlc-vllm-sagemaker-args", "nvidia-compute-capability"):
        assert CAT.sources[key].checked and CAT.sources[key].url.startswith("https://")


def test_fp8_holds_weights_at_one_byte_and_halves_the_kv_cache():
    w = load(CHAT_7B)
    fp8 = named(FP8)
    assert weights_gib(7, fp8) == pytest.approx(weights_gib(7, CHECKPOINT) / 2)
    assert weights_gib(7, fp8) == pytest.approx(7e9 / 2**30)
    assert kv_bytes_per_token(w, fp8) * 2 == kv_bytes_per_token(w, CHECKPOINT)


def test_a_token_streams_the_fp8_bytes():
    """One request on one L4: the decode step is shorter by the 7 GB the FP8 weights do not stream (the cache's bytes
    halve too, a few MB)."""
    w = load(CHAT_7B)
    g6 = CAT.get("g6.xlarge")
    t = speed.Targets()
    bf16 = speed.llm(w, g6, 1, t, max_concurrency=1)
    fp8 = speed.llm(w, g6, 1, t, max_concurrency=1, fmt=named(FP8))
    saved_ms = 7e9 / (300e9 * speed.load_serving().fits["nvidia-gpu"].efficiency) * 1e3
    assert bf16.tpot_ms - fp8.tpot_ms == pytest.approx(saved_ms, rel=0.02)
    assert fp8.quantization == FP8 and not bf16.quantization and "FP8" in fp8.basis


def test_fp8_candidates_are_marked_warned_and_carried_to_the_container():
    p = plan(load(CHAT_7B))
    rt = p.inference["realtime"]
    fp8 = [c for c in rt.candidates if c.quantization == FP8]
    assert fp8 and all(supports_fp8(CAT.get(c.instance_type)) for c in fp8)
    # the same type and degree is compared in the checkpoint's dtype too
    assert {(c.instance_type, c.tensor_parallel, c.copies) for c in fp8 if c.instance_type == "ml.g6.12xlarge"} & \
        {(c.instance_type, c.tensor_parallel, c.copies) for c in rt.candidates if not c.quantization}
    assert rt.serving.quantization == FP8
    assert {k: rt.serving.environment[k] for k, _ in load_fp8().fmt.environment} == dict(load_fp8().fmt.environment)
    warned = [f for f in p.findings if f.field == "inference.generation.quantization"]
    assert len(warned) == 1 and warned[0].level == "WARNING" and "accuracy" in warned[0].message
    assert "vllm-fp8" not in warned[0].source and "docs.vllm.ai" in warned[0].source


def test_the_table_marks_fp8_rows():
    import io

    from rich.console import Console

    from workloads.commands.report import print_plan

    out = io.StringIO()
    print_plan(plan(load(CHAT_7B)), Console(file=out, width=240, highlight=False, color_system=None))
    text = out.getvalue()
    assert "1 x 1 fp8" in text and "FP8: weights at 1 B/parameter" in text


def test_quantization_none_keeps_the_checkpoint_and_fp8_keeps_fp8_only():
    none = plan(load(CHAT_7B, {"inference.generation.quantization": "none"})).inference["realtime"]
    assert not any(c.quantization for c in none.candidates)
    assert "SM_VLLM_QUANTIZATION" not in none.serving.environment
    only = plan(load(CHAT_7B, {"inference.generation.quantization": "fp8"})).inference["realtime"]
    assert only.candidates and all(c.quantization == FP8 for c in only.candidates)


def test_fp8_on_a_gpu_without_it_is_refused_naming_the_field():
    with pytest.raises(ConfigError) as err:
        plan(load(CHAT_7B, {"inference.generation.quantization": "fp8",
                            "inference.realtime.instance_type": "ml.g5.2xlarge"}))
    assert err.value.field == "inference.generation.quantization" and "8.6" in str(err.value)


def test_no_fp8_without_an_fp8_gpu():
    """A10G, A100 and T4 types are never offered FP8, whatever the workload."""
    p = plan(load("intermediate", {"inference.requests_per_second": "40"}))
    for ip in p.inference.values():
        for c in ip.candidates:
            if c.quantization:
                assert supports_fp8(CAT.get(c.instance_type)), c


def test_the_synthesized_component_carries_the_fp8_flags(synth):
    import json

    text = json.dumps(synth(CHAT_7B).templates["InferenceStack"])
    for key, value in load_fp8().fmt.environment:
        assert f'"{key}": "{value}"' in text, key
