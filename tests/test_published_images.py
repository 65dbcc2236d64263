"""Every container image the stacks and commands use is one that was published.

The sagemaker SDK's image tables are not evidence: they once gave the never-published
`huggingface-pytorch-tgi-inference:...-inf2-...` tag (issue 22). This checks each image against the
published lists kept with their sources in tests/sources/published_images/: the repository is listed,
the tag is published for it, and the registry account is the one published for the region.

Cases are planned (pure Python) at collection, so a case can carry its own expectation; a completeness
test makes sure every image in every synthesized template is one of the planned cases.
"""

from __future__ import annotations

import difflib
import re
from functools import cache
from pathlib import Path

import pytest
import yaml

from .conftest import PRESETS, TEAMS_FILE, VARIANTS
from workloads import load, plan
from workloads.commands import jobs
from workloads.errors import ConfigError
from workloads.planning.contracts import CONTAINERS
from workloads.planning.teams import load_teams

SOURCES = Path(__file__).parent / "sources" / "published_images"
URI = re.compile(r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/"
                 r"(?P<repository>[a-z0-9._/-]+):(?P<tag>[A-Za-z0-9._-]+)$")
IMAGE_KEYS = ("Image", "ImageUri", "TrainingImage")  # the CloudFormation properties that name a container image


@cache
def published() -> tuple[dict[str, dict[str, str]], dict[str, dict]]:
    """(accounts by registry kind and region, {repository: {"registry": kind, "tags": set}}) from the fixtures."""
    accounts = yaml.safe_load((SOURCES / "registries.yaml").read_text())["registries"]
    repos: dict[str, dict] = {}
    for path in sorted(SOURCES.glob("*.yaml")):
        for name, entry in (yaml.safe_load(path.read_text()).get("repositories") or {}).items():
            tags = set(entry.get("tags", ()))
            tags |= {fmt.format(version=v) for v in entry.get("versions", ()) for fmt in entry.get("tag_formats", ())}
            assert name not in repos, f"{name} is listed in two fixture files"
            repos[name] = {"registry": entry["registry"], "tags": tags}
    return accounts, repos


def problems(where: str, uri: str) -> list[str]:
    """What is wrong with an image URI against the published lists (empty: published)."""
    accounts, repos = published()
    m = URI.match(uri)
    if not m:
        return [f"{where}: {uri!r} is not an ECR image URI (account.dkr.ecr.region.amazonaws.com/repository:tag)"]
    repo, tag, region, account = m["repository"], m["tag"], m["region"], m["account"]
    if repo not in repos:
        near = difflib.get_close_matches(repo, repos, n=3, cutoff=0.3)
        return [f"{where}: {uri}: repository {repo!r} is in no published list; nearest: {near}"]
    found = []
    if tag not in repos[repo]["tags"]:
        near = difflib.get_close_matches(tag, sorted(repos[repo]["tags"]), n=3, cutoff=0.3)
        found.append(f"{where}: {uri}: tag {tag!r} is not published for {repo}; nearest published: {near}")
    kind = repos[repo]["registry"]
    expected = accounts[kind].get(region)
    if expected != account:
        found.append(f"{where}: {uri}: registry account {account} in {region}; published for {kind} images there: "
                     f"{expected or 'no account listed for this region'}")
    return found


def assert_published(where: str, uri: str) -> None:
    found = problems(where, uri)
    assert not found, "\n".join(found)


# -- the cases: planned at collection, without CDK ------------------------------------------------------

@cache
def variant_plan(variant: str):
    workload, overrides = VARIANTS[variant]
    return plan(load(workload, overrides))


@cache
def team_plans() -> dict[str, object]:
    return {s.team.name: s.plan for s in load_teams(str(TEAMS_FILE))}


def serving_cases():
    """(estate, plan getter, inference kind)."""
    estates = [("variant", v, lambda v=v: variant_plan(v)) for v in VARIANTS]
    estates += [("team", t, lambda t=t: team_plans()[t]) for t in team_plans()]
    for source, name, get in estates:
        for kind, ip in get().inference.items():
            yield pytest.param(source, name, kind, id=f"{source}-{name}-{kind}-{ip.serving.container}")


def serving_uri(p, kind: str) -> str:
    """The image InferenceStack gives this kind (stacks/inference_stack.py `_model`)."""
    from constructs_lib.images import serving_image

    ip = p.inference[kind]
    return serving_image(container=ip.serving.container, region=p.workload.region, instance_type=ip.instance_type)


def _family_plan(preset: str, family: str):
    """The preset trained as another model family (served from that family's artifact if the preset's is not
    one it can serve); None if the planner refuses it."""
    fmt = {"pytorch": "framework-archive", "tensorflow": "framework-archive"}.get(family, family)
    # (the last without the preset's time limit: a tensorflow small is a 3-epoch encoder fine-tune over 20 GiB)
    for overrides in ({"model.framework": family}, {"model.framework": family, "inference.artifact.format": fmt},
                      {"model.framework": family, "inference.artifact.format": fmt, "training.max_hours": None}):
        try:
            return plan(load(preset, overrides))
        except ConfigError:
            continue
    return None


# Findings this test made that no branch fixes yet (reported with issue 22): strict, so a fix shows up.
JOB_CASES = [pytest.param(preset, family, id=f"{preset}-{family}")
             for preset in PRESETS for family in jobs.TRAINING_IMAGES
             if (fp := _family_plan(preset, family)) and fp.training.orchestrator == "sagemaker-jobs"]


# -- templates ------------------------------------------------------------------------------------------

def template_images(templates: dict[str, dict]) -> dict[str, set[str]]:
    """Every Image/ImageUri/TrainingImage value in the templates' resources and the TrainingImage output,
    as {uri: {"Stack/LogicalId", ...}}. A value that is not a literal string is kept as its repr, so it fails."""
    found: dict[str, set[str]] = {}

    def walk(node, where):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in IMAGE_KEYS:
                    found.setdefault(value if isinstance(value, str) else repr(value), set()).add(where)
                else:
                    walk(value, where)
        elif isinstance(node, list):
            for item in node:
                walk(item, where)

    for stack, template in templates.items():
        for logical_id, resource in template.get("Resources", {}).items():
            walk(resource.get("Properties", {}), f"{stack}/{logical_id}")
        output = template.get("Outputs", {}).get("TrainingImage")
        if output:
            found.setdefault(output["Value"], set()).add(f"{stack}/Outputs/TrainingImage")
    return found


def planned_images(p) -> set[str]:
    planned = {serving_uri(p, kind) for kind in p.inference}
    if p.training.orchestrator == "sagemaker-jobs":
        planned.add(jobs.training_image(p))
    return planned


# -- tests ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("source", "name", "kind"), list(serving_cases()))
def test_serving_image_is_published(source, name, kind, synth, teams_synth):
    p = variant_plan(name) if source == "variant" else team_plans()[name]
    uri = serving_uri(p, kind)
    if source == "variant":
        workload, overrides = VARIANTS[name]
        templates = synth(workload, overrides).templates
    else:
        templates = teams_synth.templates[name]
    where = template_images(templates).get(uri)
    assert where, f"{source} {name}: the {kind} image {uri} is not in its templates"
    assert_published(f"{source} {name} {', '.join(sorted(where))}", uri)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_template_image_is_a_checked_case(variant, synth):
    """No image escapes the cases above: the templates hold the planned serving images and the training image only."""
    workload, overrides = VARIANTS[variant]
    p = variant_plan(variant)
    found = template_images(synth(workload, overrides).templates)
    unplanned = {uri: sorted(where) for uri, where in found.items() if uri not in planned_images(p)}
    assert not unplanned, f"{variant}: images no case checks: {unplanned}"
    # A training-only estate on a cluster (Slurm, HyperPod) names no image: its nodes run the node image.
    assert set(found) == planned_images(p), f"{variant}: planned images missing from its templates"


def test_every_team_template_image_is_a_checked_case(teams_synth):
    for team, p in team_plans().items():
        found = template_images(teams_synth.templates[team])
        unplanned = {uri: sorted(where) for uri, where in found.items() if uri not in planned_images(p)}
        assert not unplanned, f"team {team}: images no case checks: {unplanned}"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_train_stack_training_image_is_published(variant, synth):
    workload, overrides = VARIANTS[variant]
    outputs = synth(workload, overrides).templates["TrainStack"].get("Outputs", {})
    p = variant_plan(variant)
    if p.training.orchestrator != "sagemaker-jobs":
        assert "TrainingImage" not in outputs
        return
    assert outputs["TrainingImage"]["Value"] == jobs.training_image(p)
    assert_published(f"{variant} TrainStack/Outputs/TrainingImage", outputs["TrainingImage"]["Value"])


@pytest.mark.parametrize(("preset", "family"), JOB_CASES)
def test_submit_training_image_is_published(preset, family):
    """`python -m workloads submit` runs jobs.training_image(plan): every family, in each preset's region
    where the preset as that family plans a SageMaker training job."""
    assert_published(f"submit {preset} ({family})", jobs.training_image(_family_plan(preset, family)))


def test_every_family_has_a_submit_case():
    """Presets that plan no SageMaker job give no case: every family must still be checked somewhere."""
    assert {c.values[1] for c in JOB_CASES} == set(jobs.TRAINING_IMAGES)


@pytest.mark.parametrize("preset", PRESETS)
def test_processing_image_is_published(preset):
    """`python -m workloads process` resolves PROCESSING_IMAGE the way jobs.process does."""
    from sagemaker.core import image_uris

    region = load(preset).region
    assert_published(f"process {preset}", image_uris.retrieve(region=region, image_scope="training",
                                                              **jobs.PROCESSING_IMAGE))


# One instance type per accelerator kind the containers declare (None: CPU and serverless).
ACCELERATOR_INSTANCE = {None: None, "nvidia-gpu": "ml.g5.xlarge", "inferentia": "ml.inf2.xlarge"}
CONTAINER_CASES = [pytest.param(key, accelerator, id=f"{key}-{accelerator or 'cpu'}")
                   for key, c in CONTAINERS.items() for accelerator in c.accelerators]


@pytest.mark.parametrize(("container", "accelerator"), CONTAINER_CASES)
def test_serving_container_table_is_published(container, accelerator):
    """Every container the planner can choose, on each accelerator it declares, in each preset's region:
    the images a workload other than the variants would get."""
    from constructs_lib.images import serving_image

    itype = ACCELERATOR_INSTANCE[accelerator]
    found = []
    for region in sorted({load(p).region for p in PRESETS}):
        uri = serving_image(container=container, region=region, instance_type=itype)
        found += problems(f"container {container} on {itype or 'CPU'} in {region}", uri)
    assert not found, "\n".join(found)


# -- the checker itself can fail --------------------------------------------------------------------------

@pytest.mark.parametrize(("uri", "complaint"), [
    ("763104351884.dkr.ecr.us-west-2.amazonaws.com/huggingface-pytorch-tgi-inference:"
     "2.7.0-optimum3.3.6-inf2-py310-ubuntu22.04", "2.7.0-optimum3.3.6-neuronx-py310-ubuntu22.04"),
    ("683313688378.dkr.ecr.us-west-2.amazonaws.com/sagemaker-xgboost:1.7-1", "246618743249"),
    ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-trainer:2.10-gpu-py313", "pytorch-training"),
    ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:latest", "is not published"),
    ("sagemaker-xgboost:1.7-1", "not an ECR image URI"),
])
def test_checker_refuses_what_was_not_published(uri, complaint):
    found = problems("here", uri)
    assert found and complaint in "\n".join(found), found


def test_checker_accepts_a_published_image():
    assert problems("here", "763104351884.dkr.ecr.us-east-2.amazonaws.com/huggingface-pytorch-tgi-inference:"
                            "2.7.0-optimum3.3.6-neuronx-py310-ubuntu22.04") == []
