"""No serving image a shipped workload plans is past its end of patch or in maintenance.

The dates and statuses are data with their sources (workloads/catalog/serving_images.yaml); today is the session's
date, so the test fails on the day an image in use passes its date. Containers no branch has replaced yet are
strictly expected to fail, so the day one is replaced the expectation has to go.
"""

from __future__ import annotations

import pytest

from workloads.catalog import ImageSupport, load_image_support
from workloads.serving import CONTAINERS

from .test_published_images import serving_cases, team_plans, variant_plan

TODAY = "2026-11-25"
# Found by this test, not fixed yet (see each container's note in serving_images.yaml).
NOT_REPLACED_YET = {"xgboost", "sklearn"}


def test_every_container_has_support_data():
    assert set(load_image_support()) == set(CONTAINERS)


def _in_use() -> dict[str, list[str]]:
    used: dict[str, list[str]] = {}
    for case in serving_cases():
        source, name, kind = case.values
        p = variant_plan(name) if source == "variant" else team_plans()[name]
        used.setdefault(p.inference[kind].serving.container, []).append(f"{source} {name} {kind}")
    return used


@pytest.mark.parametrize("container", sorted(CONTAINERS))
def test_no_image_in_use_is_past_support_or_in_maintenance(container, request):
    where = _in_use().get(container)
    if not where:
        pytest.skip(f"{container}: no shipped workload plans it")
    if container in NOT_REPLACED_YET:
        request.applymarker(pytest.mark.xfail(strict=True, reason=load_image_support()[container].note))
    problem = load_image_support()[container].problem(TODAY)
    assert not problem, f"{problem} (used by {', '.join(where[:4])})"


@pytest.mark.parametrize("container", sorted(CONTAINERS))
def test_no_container_the_planner_can_choose_is_past_support(container, request):
    """Not only the shipped workloads': any workload may be planned onto any container (before: the PyTorch 2.6
    TorchServe image, past its end of patch 2026-06-30, served every non-LLM PyTorch model)."""
    if container in NOT_REPLACED_YET:
        request.applymarker(pytest.mark.xfail(strict=True, reason=load_image_support()[container].note))
    assert not load_image_support()[container].problem(TODAY)


def test_the_check_fails_on_a_date_past_end_of_patch():
    # PyTorch 2.6 inference (TorchServe): end of patch 2026-06-30 (DLC Framework Support Policy).
    support = ImageSupport("pytorch", "pytorch-inference:2.6", "2025-01-29", "2026-06-30", "dated", "", ())
    assert support.problem("2026-06-30") == "" and "end of patch" in support.problem("2026-07-01")
    # TGI on optimum-neuron: in maintenance mode (huggingface/text-generation-inference README).
    tgi = ImageSupport("tgi-neuronx", "huggingface-pytorch-tgi-inference:2.7.0-optimum3.3.6-neuronx-py310-ubuntu22.04",
                       None, None, "maintenance", "", ())
    assert "maintenance" in tgi.problem("2000-01-01")
    # XGBoost 1.7-1: the support policy lists 3.0-5 and 3.2-0 only (serving_images.yaml).
    assert "not among the versions" in load_image_support()["xgboost"].problem("2000-01-01")
