"""`python -m workloads cost` (issue 35): Cost Explorer's month beside the plan's monthly estimate.

Against recorded GetCostAndUsage answers (tests/fixtures/cost/, each with its API reference page, shape-checked
against botocore's model by tests/recorded.py), and against the moto server, which answers GetCostAndUsage with what
a test queues for it (moto's /moto-api/static/ce/cost-and-usage-results). Nothing here reaches AWS.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from datetime import date

import pytest

from workloads import load, plan
from workloads.commands.cost import ABOVE, NOT_PLANNED, WITHIN, cost_facts, cost_report, service_of
from workloads.planning.teams import load_teams

from .conftest import ROOT, VARIANTS
from .recorded import COST_FIXTURES, checked_response, load_fixture, replay

TODAY = date(2026, 11, 26)


def ce_client():
    import boto3

    return boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing").client(
        "ce", region_name="us-east-1")


def test_every_monthly_line_of_every_variant_bills_under_a_named_service():
    """A new line in the plan's monthly estimate must say which Cost Explorer service bills it."""
    for name, (workload, overrides) in VARIANTS.items():
        p = plan(load(workload, overrides or {}))
        for line in p.monthly.lines:
            assert service_of(line.item) in set(cost_facts()["services"].values()), (name, line.item)
    assert set(cost_facts()["training_run"]) == {"slurm", "hyperpod", "sagemaker-jobs"}


def test_a_closed_month_line_by_line_with_the_lines_that_differ():
    client = replay(ce_client(), "small-2026-10", folder=COST_FIXTURES)
    r = cost_report(plan(load("small")), client, month="2026-10", team=None, runs=1, today=TODAY)
    by = {x.service: x for x in r.lines}
    assert r.share == 1 and not r.estimated
    assert by["Amazon SageMaker"].verdict == ABOVE  # 141.20 against 63.07 to 105.64
    assert by["AWS Lambda"].verdict == NOT_PLANNED and by["AWS Lambda"].planned_usd is None
    assert [x.service for x in r.lines if x.differs] == ["Amazon SageMaker"]  # Lambda's cents are under the floor
    assert {s for s, x in by.items() if x.verdict == WITHIN} == {
        "EC2 - Other", "Amazon Virtual Private Cloud", "AWS Key Management Service", "AmazonCloudWatch",
        "Amazon Simple Storage Service"}
    assert "1 training run (1 x r5.2xlarge)" in by["Amazon SageMaker"].items
    assert r.actual_usd == pytest.approx(192.42, abs=0.01)
    # What was asked: the month, the workload's tag, by service, unblended.
    assert r.request["Filter"] == {"Tags": {"Key": "workload", "Values": ["small"], "MatchOptions": ["EQUALS"]}}
    assert r.request["GroupBy"] == [{"Type": "DIMENSION", "Key": "SERVICE"}]
    assert r.request["TimePeriod"] == {"Start": "2026-10-01", "End": "2026-11-01"}


def test_a_teams_month_so_far_over_two_pages_scaled_to_the_days_covered():
    stamped = load_teams(str(ROOT / "config" / "teams.yaml"), only="vision")[0]
    client = replay(ce_client(), "vision-2026-11", folder=COST_FIXTURES)
    r = cost_report(stamped.plan, client, month=None, team="vision", runs=0, today=TODAY)
    assert r.estimated and r.share == pytest.approx(25 / 30)
    assert r.request["Filter"]["And"][1] == {"Tags": {"Key": "team", "Values": ["vision"], "MatchOptions": ["EQUALS"]}}
    by = {x.service: x for x in r.lines}
    assert set(by) >= {"Amazon SageMaker", "EC2 - Other", "Amazon Simple Storage Service", "AmazonCloudWatch"}
    full = stamped.plan.monthly  # the team's plan, within its families
    sagemaker = sum(x.usd for x in full.lines if service_of(x.item) == "Amazon SageMaker")
    assert by["Amazon SageMaker"].planned_usd == pytest.approx(sagemaker * 25 / 30, abs=0.02)


def test_bad_arguments_are_refused_before_any_aws_call():
    out = subprocess.run([sys.executable, "-m", "workloads", "cost", "small", "--month", "2026-13", "--runs", "-1"],
                         cwd=ROOT, capture_output=True, text=True, env={**os.environ, "AWS_ENDPOINT_URL": "http://x"})
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.splitlines() == [
        "error: --month = '2026-13': not a month; allowed: a month as YYYY-MM, e.g. 2026-10",
        "error: --runs = -1: out of range; allowed: 0 or more training runs in the month"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def moto_server():
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://localhost:{port}"
    finally:
        server.stop()


def test_the_command_against_the_moto_server(moto_server):
    """The CLI as a user runs it, with moto answering GetCostAndUsage with the recorded month (checked first)."""
    recorded = load_fixture("small-2026-10", COST_FIXTURES)["calls"][0]
    checked_response(ce_client(), recorded)
    queued = json.dumps({"results": [recorded["response"]]}).encode()
    urllib.request.urlopen(urllib.request.Request(f"{moto_server}/moto-api/static/ce/cost-and-usage-results",
                                                  data=queued, method="POST"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_ENDPOINT_URL": moto_server, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull})
    out = subprocess.run([sys.executable, "-m", "workloads", "cost", "small", "--month", "2026-10", "--json"],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    [r] = json.loads(out.stdout)
    verdicts = {x["service"]: x["verdict"] for x in r["lines"]}
    assert verdicts["Amazon SageMaker"] == ABOVE and verdicts["AWS Lambda"] == NOT_PLANNED
    assert r["actual_usd"] == pytest.approx(192.42, abs=0.01)
    table = subprocess.run([sys.executable, "-m", "workloads", "cost", "small", "--month", "2026-10"],
                           cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert table.returncode == 0, table.stderr
    assert "1 of 7 lines differ from the plan by more than its range: Amazon SageMaker\n" in table.stdout


def test_without_credentials_nothing_is_sent(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true"})
    out = subprocess.run([sys.executable, "-m", "workloads", "cost", "small"], cwd=ROOT, capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 1 and "no AWS credentials were found, so nothing was sent" in out.stderr


def test_every_service_name_the_plan_bills_under_says_where_it_was_read():
    """Each SERVICE value the map and the training run use has its row: confirmed at an AWS-authored source, or
    marked as found only in public tools or nowhere (issue 35)."""
    facts = cost_facts()
    used = set(facts["services"].values()) | set(facts["training_run"].values())
    rows = facts["service_names"]
    assert used == set(rows), sorted(used ^ set(rows))
    for name, row in rows.items():
        assert row["status"] in ("confirmed", "public-tools-only", "not-found"), name
        source = facts["sources"][row["source"]]
        if row["status"] == "confirmed":
            assert source["url"].startswith(("https://docs.aws.amazon.com/", "https://github.com/cloudscape-design/",
                                              "https://github.com/aws/")), name
            assert name in source["title"] or name in facts["sources"][row["also"]]["title"], name
        else:
            assert row["seen"], name  # what was (not) found, in words


def test_the_report_says_which_service_names_are_not_confirmed(capsys):
    from workloads.commands.report import print_cost

    client = replay(ce_client(), "small-2026-10", folder=COST_FIXTURES)
    r = cost_report(plan(load("small")), client, month="2026-10", team=None, runs=1, today=TODAY)
    by = {x.service: x for x in r.lines}
    assert by["Amazon Simple Storage Service"].name_status == "confirmed"
    assert by["Amazon SageMaker"].name_status == "public-tools-only"
    assert by["AWS Lambda"].name_status == "from Cost Explorer"  # billed, not planned: Cost Explorer's own name
    print_cost(r)
    out = " ".join(capsys.readouterr().out.split())
    assert "Not confirmed at an AWS source as Cost Explorer's SERVICE name: Amazon SageMaker" in out
    assert {x["service"]: x["service_name"] for x in r.as_dict()["lines"]}["EC2 - Other"] == "confirmed"
