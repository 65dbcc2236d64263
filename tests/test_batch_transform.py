"""Batch transform sends each container what it reads, and runs as many requests at once as the plan prices
(issue 22, items 4 and 5). Every variant with batch and every team's estate is read from its synthesized state
machine; the container is derived from the model's image, as test_serving_contract does."""

from __future__ import annotations

import json

import pytest

from workloads import load, plan
from workloads.config.schema import TRANSFORM_MAX_MB
from workloads.planning.contracts import CONTAINERS, REQUESTS
from workloads.planning.teams import load_teams

from .conftest import TEAMS_FILE, VARIANTS
from .test_serving_contract import _container


def _transform_jobs(template: dict) -> list[tuple[str, dict]]:
    """(container, CreateTransformJob parameters) of every state machine in an InferenceStack template."""
    images = {lid: r["Properties"]["PrimaryContainer"]["Image"] for lid, r in template["Resources"].items()
              if r["Type"] == "AWS::SageMaker::Model"}
    out = []
    for r in template["Resources"].values():
        if r["Type"] != "AWS::StepFunctions::StateMachine":
            continue
        parts = r["Properties"]["DefinitionString"]["Fn::Join"][1]
        models = [p["Fn::GetAtt"][0] for p in parts if isinstance(p, dict) and p.get("Fn::GetAtt", [""])[-1] == "ModelName"]
        text = "".join(p if isinstance(p, str) else "TOKEN" for p in parts)
        for state in json.loads(text)["States"].values():
            if state.get("Resource", "").endswith("createTransformJob.sync"):  # a drain is a Map (test_hosts.py)
                assert len(models) == 1, models
                out.append((_container(images[models[0]]), state["Parameters"]))
    return out


def _batch_variants() -> list[str]:
    """Variants whose batch is a transform job (not one drained through the async endpoint: tests/test_hosts.py)."""
    out = []
    for v, (workload, overrides) in VARIANTS.items():
        batch = plan(load(workload, overrides)).inference.get("batch")
        if batch is not None and not batch.serving.drain:
            out.append(v)
    return out


def _request_problems(container: str, params: dict) -> list[str]:
    rule = REQUESTS[container]
    sent = {"ContentType": params["TransformInput"].get("ContentType"),
            "SplitType": params["TransformInput"].get("SplitType"), "BatchStrategy": params.get("BatchStrategy"),
            "Accept": params["TransformOutput"].get("Accept"),
            "AssembleWith": params["TransformOutput"].get("AssembleWith")}
    wanted = {"ContentType": rule.content_type, "SplitType": rule.split_type, "BatchStrategy": rule.batch_strategy,
              "Accept": rule.accept, "AssembleWith": rule.assemble_with}
    return [f"{container}: {k} {sent[k]!r}, its rule says {wanted[k]!r} ({rule.source[:80]}...)"
            for k in wanted if sent[k] != wanted[k]]


def test_every_container_rule_is_self_consistent():
    """Each rule sends a content type the container reads; one-document readers get one record a request."""
    assert set(REQUESTS) == set(CONTAINERS)
    for key, rule in REQUESTS.items():
        assert rule.content_type in rule.reads and rule.source, key
        assert rule.batch_strategy == ("SingleRecord" if rule.records == "one" else "MultiRecord"), key
        if rule.reads == ("application/json",):  # a JSON body is one document: never lines glued together
            assert rule.records == "one", key


@pytest.mark.parametrize("variant", _batch_variants())
def test_each_variants_transform_job_sends_what_its_container_reads(synth, variant):
    workload, overrides = VARIANTS[variant]
    jobs = _transform_jobs(synth(workload, overrides).templates["InferenceStack"])
    assert jobs, "a batch plan synthesizes a transform job"
    problems = [p for container, params in jobs for p in _request_problems(container, params)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("variant", _batch_variants())
def test_the_job_runs_as_many_requests_at_once_as_the_plan_prices(synth, variant):
    workload, overrides = VARIANTS[variant]
    batch = plan(load(workload, overrides)).inference["batch"]
    (_, params), = _transform_jobs(synth(workload, overrides).templates["InferenceStack"])
    assert params["MaxConcurrentTransforms"] == batch.max_concurrent_transforms == batch.concurrency
    assert params["MaxConcurrentTransforms"] * params["MaxPayloadInMB"] <= TRANSFORM_MAX_MB


def test_team_transform_jobs_follow_the_same_rules(teams_synth):
    plans = {s.team.name: s.plan for s in load_teams(str(TEAMS_FILE))}
    checked = 0
    for team, stacks in teams_synth.templates.items():
        for container, params in _transform_jobs(stacks.get("InferenceStack", {"Resources": {}})):
            checked += 1
            assert not _request_problems(container, params), (team, _request_problems(container, params))
            assert params["MaxConcurrentTransforms"] == plans[team].inference["batch"].concurrency, team
    assert checked, "no team runs batch transform: nothing was checked"


def test_a_configured_concurrency_is_what_the_job_is_priced_at():
    default = plan(load("huge")).inference["batch"]
    two = plan(load("huge", {"inference.batch.max_concurrent_transforms": "2"})).inference["batch"]
    assert (two.max_concurrent_transforms, two.concurrency) == (2, 2) and default.concurrency > 2
    assert two.requests_per_second_per_instance < default.requests_per_second_per_instance


def test_more_in_flight_than_the_container_serves_waits_and_says_so():
    over = plan(load("huge", {"inference.batch.max_concurrent_transforms": "10",
                              "inference.generation.max_batch_size": "4"})).inference["batch"]
    assert over.max_concurrent_transforms == 10 and over.concurrency == 4  # the LLM container serves max_batch_size 4 at once
    assert "the other 6 of max_concurrent_transforms 10 wait" in over.reason


def test_the_payload_rule_bounds_the_chosen_concurrency():
    """100 MB / 50 MB payloads: at most 2 in flight, even where the container would serve more."""
    p = plan(load("small", {"inference.batch.max_payload_mb": "50"})).inference["batch"]
    assert p.max_concurrent_transforms == p.concurrency == TRANSFORM_MAX_MB // 50


def test_a_run_states_its_records_how_the_job_batches_them_and_its_start_up(tmp_path):
    """The README's churn example printed 'one scheduled run $0.00 (0.00 h)' and hid the assumed record count
    (configuration.md: 'said in the plan'), the MultiRecord batching and the start-up (issue 34 item 8)."""
    from workloads.commands.report import print_plan
    from rich.console import Console

    (tmp_path / "churn.yaml").write_text("name: churn\nregion: us-east-1\navailability_zone: us-east-1a\n"
                                         "model: {parameters_billion: 0.001, framework: xgboost}\n"
                                         "data: {dataset_size_gib: 20}\ntraining: {max_hours: 4}\n"
                                         "inference: {batch: {schedule: 'cron(0 2 * * ? *)'}}\n")
    p = plan(load(str(tmp_path / "churn.yaml")))
    b = p.inference["batch"]
    run = b.batch_run
    assert run.records_assumed and run.records == round(p.workload.inference.requests_per_second * 3600)
    assert run.records_per_request == int(b.max_payload_mb / p.workload.inference.payload_mb)  # MultiRecord, 6 MB
    assert "60 a request (MultiRecord" in run.basis and "start-up" in run.basis
    console = Console(width=400, record=True)
    print_plan(p, console)
    text = console.export_text()
    assert f"run: {run.records:,} records" in text and "(0.00 h)" not in text  # the cell wraps between words
    assert "under $0.01" in text and "start-up" in text
    # A model that takes minutes to fetch and load bills them on every run; a SingleRecord container takes one a request.
    huge = plan(load("huge")).inference["batch"].batch_run
    assert huge.records_per_request == 1 and huge.startup_s > 60
    # (huge's GPU LLM batch is drained through its async endpoint, so it bills at that endpoint's fleet: hosts.py)
    served = plan(load("huge")).inference
    fleet = served["async"] if served["batch"].serving.drain == "async" else served["batch"]
    assert huge.usd == pytest.approx((huge.hours + huge.startup_s / 3600) * fleet.usd_per_hour_max, rel=1e-2)
