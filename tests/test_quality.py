"""Every synthesized template: zero cfn-lint errors, zero unacknowledged cdk-nag AwsSolutions and NIST 800-53
rev 5 findings (both packs run in every synthesis: stacks.build.add_checks)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import yaml
from cfnlint.api import ManualArgs, lint_file

from .conftest import ROOT, cdk_json_context

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

    from stacks.build import add_checks

    app = cdk.App(outdir=str(tmp_path), context=cdk_json_context())
    s3.Bucket(cdk.Stack(app, "Canary"), "Plain")
    add_checks(app)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    found = _violations(report, "AwsSolutions")
    assert any("AwsSolutions-S1" in f for f in found) and any("AwsSolutions-S10" in f for f in found), found
    nist = _violations(report, "NIST.800.53.R5")
    assert any("S3BucketVersioningEnabled" in f for f in nist) and any("S3DefaultEncryptionKMS" in f for f in nist), nist


def test_cdk_nag_aws_solutions_and_nist_have_no_unacknowledged_finding(variant_synth):
    _, s = variant_synth
    assert _violations(s.nag_report, "AwsSolutions") == []
    assert _violations(s.nag_report, "NIST.800.53.R5") == []
    errors = [v for r in s.nag_report["pluginReports"] for v in r.get("violations", []) if v["severity"] == "error"]
    assert errors == []


def test_cfn_lint_is_clean(variant_synth):
    _, s = variant_synth
    problems = []
    for stack in s.templates:
        region = s.artifact(stack)["environment"].rsplit("/", 1)[-1]
        problems += [f"{stack}: {m}" for m in lint(s.template_path(stack), region)]
    assert not problems, "\n".join(problems)
