"""Every synthesized template: zero cfn-lint errors, zero unacknowledged cdk-nag findings in all four packs
(AwsSolutions and NIST 800-53 rev 5 run in every synthesis; the tests add HIPAA Security and PCI DSS 3.2.1:
constructs_lib.nag.ALL_PACKS)."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path

import pytest

import yaml
from cfnlint.config import ConfigMixIn
from cfnlint.runner import Runner
from cfnlint.runner.template.runner import run_template_by_file_path

from constructs_lib.nag import ALL_PACKS, COMPLIANCE_PACKS

from .conftest import PRESETS, ROOT, VARIANTS, cdk_json_context, e2e_beyond

PLUGINS = ("AwsSolutions", *COMPLIANCE_PACKS)  # the packs' report names, one per ALL_PACKS entry

LINT_SETTINGS = yaml.safe_load((ROOT / ".cfnlintrc.yaml").read_text())


_LINTED: dict[tuple[str, str], list] = {}


@cache
def _linter(region: str) -> tuple:
    """cfn-lint's configuration and rules for a region, made once: cfnlint.api.lint_file loads every rule again for
    each template (about half a second), where the `cfn-lint` command loads them once for all the files it is given;
    this runs each template as that command does."""
    config = ConfigMixIn([], **{**LINT_SETTINGS, "regions": [region]})
    return config, Runner(config).rules


def lint(path, region: str) -> list:
    """cfn-lint's findings for a template in the region it deploys to (instance types differ by region: trn2 is
    not in cfn-lint's default us-east-1 list). A template byte-identical to one already linted in the same region
    (the variants share most stacks) gets that result instead of a second lint."""
    key = (hashlib.sha256(Path(path).read_bytes()).hexdigest(), region)
    if key not in _LINTED:
        config, rules = _linter(region)
        _LINTED[key] = list(run_template_by_file_path(str(path), config, rules, False))
    return _LINTED[key]


def test_the_linter_finds_an_error_in_a_template(tmp_path):
    """The rules loaded once still judge each template: an unknown property is an error, a hard-coded zone is the
    warning .cfnlintrc.yaml ignores, a clean template after a bad one gets no finding of the bad one's."""
    bad = {"Resources": {"Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"NoSuchProp": 1}},
                         "Subnet": {"Type": "AWS::EC2::Subnet", "Properties": {
                             "VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.0.0.0/24", "AvailabilityZone": "us-east-2a"}},
                         "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}}}}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    (tmp_path / "good.json").write_text(json.dumps({"Resources": {"Vpc": bad["Resources"]["Vpc"]}}))
    found = lint(tmp_path / "bad.json", "us-east-2")
    assert [m.rule.id for m in found] == ["E3002"] and "NoSuchProp" in str(found[0]), found
    assert lint(tmp_path / "good.json", "us-east-2") == []


def _violations(report: dict, plugin: str) -> list[str]:
    return [f"{v['ruleName']} ({v['severity']}) at {[c['constructPath'] for c in v['violatingConstructs']]}"
            for r in report["pluginReports"] if r["pluginName"] == plugin for v in r.get("violations", [])]


def test_cdk_nag_runs_and_reports_findings(tmp_path):
    """The check pipeline is live: an unencrypted, unlogged bucket is reported (so silence means clean)."""
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3

    from constructs_lib.nag import acknowledge
    from stacks.build import add_checks

    app = cdk.App(outdir=str(tmp_path), context=cdk_json_context())
    bucket = s3.Bucket(cdk.Stack(app, "Canary"), "Plain")
    # One acknowledgement, one reason: the same finding is silent in every pack that has it.
    acknowledge(bucket, "NIST.800.53.R5-S3BucketReplicationEnabled", "canary reason")
    add_checks(app, ALL_PACKS)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    assert sorted(r["pluginName"] for r in report["pluginReports"]) == sorted(PLUGINS)
    found = _violations(report, "AwsSolutions")
    assert any("AwsSolutions-S1" in f for f in found) and any("AwsSolutions-S10" in f for f in found), found
    for pack in COMPLIANCE_PACKS:
        seen = _violations(report, pack)
        assert any("S3BucketVersioningEnabled" in f for f in seen), (pack, seen)
        assert not any("S3BucketReplicationEnabled" in f for f in seen), (pack, seen)


def test_cdk_nag_all_four_packs_have_no_unacknowledged_finding(variant_synth):
    """An unacknowledged finding fails the synthesis itself; the report of a clean one lists no violation."""
    _, s = variant_synth
    for plugin in PLUGINS:
        assert _violations(s.nag_report, plugin) == [], plugin
    errors = [v for r in s.nag_report["pluginReports"] for v in r.get("violations", []) if v["severity"] == "error"]
    assert errors == []


def test_the_tests_synthesize_with_all_four_packs(monkeypatch):
    """Every synthesis of the tests (variants and the teams file, conftest.build_app) runs ALL_PACKS, which the
    canary above shows are the four packs."""
    import stacks.build

    from .conftest import build_app

    seen = {}
    monkeypatch.setattr(stacks.build, "build", lambda app, target, **kw: seen.update(kw))
    monkeypatch.setattr("workloads.commands.context.read_context", lambda context: None)
    build_app(type("App", (), {"node": type("N", (), {"get_all_context": lambda self: {}})()})())
    assert seen["packs"] == ALL_PACKS and len(ALL_PACKS) == len(PLUGINS)


@pytest.mark.parametrize("variant", e2e_beyond(VARIANTS, PRESETS))  # the presets here, the other variants in e2e
def test_cfn_lint_is_clean(variant, variant_synth_by_name):
    s = variant_synth_by_name(variant)
    problems = []
    for stack in s.templates:
        region = s.artifact(stack)["environment"].rsplit("/", 1)[-1]
        problems += [f"{stack}: {m}" for m in lint(s.template_path(stack), region)]
    assert not problems, "\n".join(problems)
