"""Every synthesized template: zero cfn-lint errors, zero unacknowledged cdk-nag findings in all four packs
(AwsSolutions and NIST 800-53 rev 5 run in every synthesis; the tests add HIPAA Security and PCI DSS 3.2.1:
constructs_lib.nag.ALL_PACKS)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import yaml
from cfnlint.api import ManualArgs, lint_file

from constructs_lib.nag import ALL_PACKS, COMPLIANCE_PACKS

from .conftest import PRESETS, ROOT, VARIANTS, cdk_json_context, e2e_beyond

PLUGINS = ("AwsSolutions", *COMPLIANCE_PACKS)  # the packs' report names, one per ALL_PACKS entry

LINT_SETTINGS = yaml.safe_load((ROOT / ".cfnlintrc.yaml").read_text())


_LINTED: dict[tuple[str, str], list] = {}


def lint(path, region: str) -> list:
    """cfn-lint's findings for a template in the region it deploys to (instance types differ by region: trn2 is
    not in cfn-lint's default us-east-1 list). A template byte-identical to one already linted in the same region
    (the variants share most stacks) gets that result instead of a second lint."""
    key = (hashlib.sha256(Path(path).read_bytes()).hexdigest(), region)
    if key not in _LINTED:
        _LINTED[key] = lint_file(Path(path), ManualArgs(**{**LINT_SETTINGS, "regions": [region]}))
    return _LINTED[key]


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
