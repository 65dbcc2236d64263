"""KV-cache room from the memory the driver reports (review R6 F3): vLLM sizes its cache from gpu_memory_utilization
of nvidia-smi's total, less weights and what it keeps for activations and CUDA graphs, not from the catalog's marketing
figure (8 x L4 is "192 GiB" on AWS's page; the driver reports 23,034 MiB, 22.5 GiB, each)."""

from __future__ import annotations

import pytest

from workloads import load, plan
from workloads.catalog import devices, load_catalog, load_serving
from workloads.planning.contracts import SERVING_MEMORY_FRACTION, device_room, holds, kv_bytes_per_token, weights_gib

FACTS, CAT = load_serving(), load_catalog()
RESERVE = FACTS.vllm_reserve_gib[0]
RECORDED = sorted({t.name for t in CAT.types.values()
                   if t.accelerator and t.accelerator.kind == "nvidia-gpu" and t.accelerator.model in FACTS.driver_mib})


def test_every_driver_figure_and_the_reserve_cite_a_dated_source():
    for model, (mib, key) in {**FACTS.driver_mib, "reserve": (0, FACTS.vllm_reserve_gib[1])}.items():
        source = CAT.sources[key]
        assert source.url.startswith("https://") and source.checked, model
        assert model == "reserve" or str(mib) in source.note, (model, mib, source.note)
    # The GPUs served most (L4, A10G, T4, A100, H100, H200) all have a figure.
    assert {"NVIDIA L4", "NVIDIA A10G", "NVIDIA T4", "NVIDIA A100 40GB", "NVIDIA H100 80GB", "NVIDIA H200"} \
        <= set(FACTS.driver_mib)


@pytest.mark.parametrize("name", RECORDED)
def test_room_is_the_driver_total_not_the_marketing_figure(name):
    itype = CAT.types[name]
    _, catalog_gib = devices(itype)
    driver_gib = FACTS.driver_mib[itype.accelerator.model][0] / 1024
    # The driver never reports more than the marketing figure, and not much less (a typo would).
    assert 0.9 * catalog_gib <= driver_gib <= catalog_gib, (name, driver_gib, catalog_gib)
    room = driver_gib * SERVING_MEMORY_FRACTION - RESERVE
    assert device_room(itype)[0] == pytest.approx(room)
    # Weights one GiB over the room do not fit on one device, though the marketing figure's 90% holds them.
    params = (room + 1) * 2**30 / 2 / 1e9  # bf16: 2 bytes a parameter
    assert weights_gib(params) < catalog_gib * SERVING_MEMORY_FRACTION
    assert not holds(params, itype, 1, 0.0)
    assert holds(params * (room - 0.5) / (room + 1), itype, 1, 0.0)


def test_huge_async_concurrency_fits_8_l4s_kv_cache():
    w = load("huge")
    ip = plan(w).inference["async"]
    assert ip.instance_type == "ml.g6.48xlarge"
    tokens_in, tokens_out = w.inference.generation.typical()
    per_sequence_gib = kv_bytes_per_token(w) * (tokens_in + tokens_out) / 2**30
    room = 8 * (23034 / 1024 * SERVING_MEMORY_FRACTION - RESERVE) - weights_gib(w.model.parameters_billion)
    fits = int(room // per_sequence_gib)
    # The review's 217 was planned on 8 x 24 GiB; what fits on the driver's 8 x 22.5 GiB is well under it.
    assert ip.concurrency == fits < 150, (ip.concurrency, fits)
    assert ip.max_concurrent_invocations_per_instance == ip.concurrency


def test_a_type_too_small_is_refused_with_the_room_vllm_has():
    from workloads.errors import ConfigError
    with pytest.raises(ConfigError) as e:
        plan(load("huge", {"inference.async.instance_type": "ml.g5.2xlarge"}))
    assert "23028 MiB the driver reports" in str(e.value) and "18.2 GiB" in str(e.value)
