"""Every scikit-learn image the toolkit names carries a tag AWS's image data lists (catalog/serving_images.yaml `tags`).

Before: training, processing and serving named sagemaker-scikit-learn:1.9-0-cpu-py3, the tag the SDK builds; AWS's image
data for 1.9-0 lists the tag 1.9-0 only (aws/deep-learning-containers docs/src/data/sagemaker-scikit-learn/
1.9-0-cpu-sagemaker.yml), so a Processing job on the unlisted alias may find no image.
"""

from __future__ import annotations

import json
import re

import pytest

from workloads import load, plan
from workloads.catalog import _load_yaml
from workloads.commands import image_cache
from workloads.commands.jobs import PROCESSING_IMAGE, processing_image, training_image
from workloads.planning.contracts import CONTAINERS

from .conftest import ROOT, VARIANTS

REPOSITORY = "sagemaker-scikit-learn"
IMAGE = re.compile(REPOSITORY + r":([A-Za-z0-9._-]+)")


def listed() -> set[str]:
    return set(_load_yaml("serving_images.yaml")["containers"]["sklearn"]["tags"])


def _tags(text: str) -> set[str]:
    return set(IMAGE.findall(text))


# The shipped workloads whose SageMaker jobs run a processing step (huge trains on Slurm: no SageMaker job image).
CASES = {"small": VARIANTS["small"], "intermediate": VARIANTS["intermediate"],
         **{p.stem: (str(p), None) for p in sorted((ROOT / "examples" / "workloads").glob("*.yaml"))}}


@pytest.mark.parametrize("variant", sorted(CASES))
def test_every_synthesized_scikit_learn_image_is_listed(synth, variant):
    workload, overrides = CASES[variant]
    templates = synth(workload, overrides).templates
    tags = set().union(*(_tags(json.dumps(t)) for t in templates.values()))
    assert tags, f"{variant}: no scikit-learn image named (the walk found none)"
    assert tags <= listed(), f"{variant}: {sorted(tags - listed())} not among AWS's listed tags {sorted(listed())}"


def test_every_teams_scikit_learn_image_is_listed(teams_synth):
    tags = set().union(*(_tags(json.dumps(t)) for stacks in teams_synth.templates.values() for t in stacks.values()))
    assert tags and tags <= listed(), sorted(tags)


def test_processing_training_and_serving_use_the_listed_tag():
    for region in ("us-east-1", "us-east-2", "us-west-2"):
        assert _tags(processing_image(region)) <= listed()
    sklearn = load("small", {"model.framework": "scikit-learn"})
    assert _tags(training_image(plan(sklearn))) <= listed()
    from constructs_lib.images import serving_image

    assert _tags(serving_image(container="sklearn", region="us-west-2", instance_type="ml.m5.large")) <= listed()


def test_the_pin_is_still_needed():
    """The SDK's own tag for 1.9-0: when AWS lists it, drop the pin in contracts.py."""
    sdk = image_cache.retrieve(region="us-west-2", image_scope="training", **PROCESSING_IMAGE)
    assert not _tags(sdk) <= listed(), f"the SDK's {sdk} is listed now: drop CONTAINERS['sklearn'].tag"
    assert CONTAINERS["sklearn"].tag in listed()
