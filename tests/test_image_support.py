"""No serving image a shipped workload plans is past its end of patch or in maintenance.

The dates and statuses are data with their sources (workloads/catalog/serving_images.yaml); today is the session's
date, so the test fails on the day an image in use passes its date. Containers no branch has replaced yet are
strictly expected to fail, so the day one is replaced the expectation has to go.
"""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from workloads.catalog import LATEST_RECHECK_DAYS, ImageSupport, load_image_support
from workloads.planning.contracts import CONTAINERS

from .test_published_images import serving_cases, team_plans, variant_plan

TODAY = "2026-11-28"
# Found by this test, not fixed yet (see each container's note in serving_images.yaml). XGBoost 1.7-1 and
# scikit-learn 1.2-1 were here until they moved to 3.2-0 and 1.9-0.
NOT_REPLACED_YET: set[str] = set()


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
    # XGBoost 1.7-1: the support policy lists 3.0-5 and 3.2-0 only.
    old = ImageSupport("xgboost", "sagemaker-xgboost:1.7-1", None, None, "unlisted", "", ())
    assert "not among the versions" in old.problem("2000-01-01")


def test_a_latest_only_image_fails_when_its_check_is_stale():
    """AWS supports only the latest vLLM DLC: the pinned release carries the day it was found to be the latest, and
    the support test turns red once that is older than LATEST_RECHECK_DAYS (before: v2.3 stayed pinned after v2.4-v2.6
    shipped, with nothing to say so)."""
    vllm = load_image_support()["vllm"]
    assert vllm.status == "supported-while-latest" and vllm.latest_checked
    assert vllm.image.startswith("vllm:server-sagemaker-cuda-v2.6")
    checked = date.fromisoformat(vllm.latest_checked)
    assert vllm.problem(str(checked + timedelta(days=LATEST_RECHECK_DAYS))) == ""
    assert "latest release" in vllm.problem(str(checked + timedelta(days=LATEST_RECHECK_DAYS + 1)))
    undated = ImageSupport("vllm", "vllm:x", None, None, "supported-while-latest", "", ())
    assert "no check date" in undated.problem("2000-01-01")


def test_the_pinned_vllm_is_the_newest_published():
    """The vLLM tag the planner deploys is the newest Amazon Linux SageMaker build in AWS's published tags."""
    import re

    from .test_published_images import published
    tags = [t for t in published()[1]["vllm"]["tags"] if re.fullmatch(r"server-sagemaker-cuda-v\d+\.\d+", t)]
    newest = max(tags, key=lambda t: tuple(int(x) for x in t.rsplit("-v", 1)[1].split(".")))
    assert dict(CONTAINERS["vllm"].image)["version"] == newest.rsplit("-v", 1)[1]


@pytest.mark.parametrize(("container", "tag", "last_day"), [
    # aws/deep-learning-containers docs/src/data/sagemaker-xgboost/3.2-0-cpu-sagemaker.yml: eop "2027-05-13".
    ("xgboost", "sagemaker-xgboost:3.2-0", "2027-05-13"),
    # docs/src/data/sagemaker-scikit-learn/1.9-0-cpu-sagemaker.yml: eop "2027-07-16".
    ("sklearn", "sagemaker-scikit-learn:1.9-0", "2027-07-16"),
])
def test_the_classic_containers_fail_the_day_after_their_end_of_patch(container, tag, last_day):
    """The classic containers are dated, not merely listed: the support test turns red the day after."""
    support = load_image_support()[container]
    assert support.image.startswith(tag) and support.eop == last_day
    assert support.problem(last_day) == ""
    day_after = (date.fromisoformat(last_day) + timedelta(days=1)).isoformat()
    assert f"past its end of patch {last_day}" in support.problem(day_after)


def test_training_processing_and_serving_run_the_same_classic_images():
    """A booster or joblib model loads in the version that saved it: the job images are the serving images."""
    from workloads.commands import jobs

    xgb, skl = dict(CONTAINERS["xgboost"].image), dict(CONTAINERS["sklearn"].image)
    assert jobs.TRAINING_IMAGES["xgboost"] == xgb and xgb["version"] == "3.2-0"
    assert jobs.TRAINING_IMAGES["scikit-learn"] == jobs.PROCESSING_IMAGE == skl and skl["version"] == "1.9-0"
    for key, support in (("xgboost", xgb), ("sklearn", skl)):
        assert f":{support['version']} " in load_image_support()[key].image + " "
