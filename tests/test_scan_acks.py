"""Issue 44: the outside scanners' acknowledgements (tools/scan_acks.yaml) and the policy reading that parliament is
given (tools/scan_templates.py). The scanners themselves run in `make scan`, not here (minutes, and a venv apart)."""

from __future__ import annotations

import yaml

from tools.scan_templates import ACKS, SCANNERS, _EXPORTS, Finding, _resolve, acknowledged

VERDICTS = {"false-positive", "by-design", "real-deferred"}


def test_every_acknowledgement_names_a_scanner_a_verdict_and_a_reason():
    acks = yaml.safe_load(ACKS.read_text())["acknowledged"]
    assert acks
    for ack in acks:
        assert ack["scanner"] in SCANNERS and ack["verdict"] in VERDICTS, ack
        assert len(ack["reason"]) > 40 and ack["rule"] and ack["where"], ack


def test_an_acknowledgement_matches_its_scanner_rule_and_place_only():
    acks = [{"scanner": "cfn-guard", "rule": "CT.S3.PR.[12]0", "where": "*DatasetsAccessLogs*", "verdict": "by-design",
             "reason": "x"}]
    assert acknowledged(Finding("cfn-guard", "CT.S3.PR.10", "huge:DataStack/DatasetsAccessLogs72037CA6", ""), acks)
    assert not acknowledged(Finding("cfn-guard", "CT.S3.PR.10", "huge:DataStack/DatasetsDataset6D2CC711", ""), acks)
    assert not acknowledged(Finding("cfn-guard", "CT.S3.PR.11", "huge:DataStack/DatasetsAccessLogs72037CA6", ""), acks)
    assert not acknowledged(Finding("checkov", "CT.S3.PR.10", "huge:DataStack/DatasetsAccessLogs72037CA6", ""), acks)


def test_policies_are_read_with_imports_resolved_from_their_exporting_stack():
    """parliament saw `*` for every imported key and bucket (RESOURCE_STAR on kms:Decrypt): an import resolves to what
    its exporter's output says, and a model's Ref to its ARN."""
    exporter = {"Resources": {"DataKey": {"Type": "AWS::KMS::Key"}},
                "Outputs": {"O": {"Value": {"Fn::GetAtt": ["DataKey", "Arn"]}, "Export": {"Name": "d:KeyArn"}}}}
    _EXPORTS["d:KeyArn"] = (exporter, exporter["Outputs"]["O"]["Value"])
    user = {"Resources": {"Model": {"Type": "AWS::SageMaker::Model"}}}
    assert _resolve({"Fn::ImportValue": "d:KeyArn"}, user, "us-east-1") == \
        "arn:aws:kms:us-east-1:123456789012:key/datakey"
    assert _resolve({"Ref": "Model"}, user, "us-east-1") == "arn:aws:sagemaker:us-east-1:123456789012:model/model"
    assert _resolve({"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::b/*"]]}, user, "x") == "arn:aws:s3:::b/*"
    assert _resolve({"Fn::ImportValue": "unknown"}, user, "us-east-1") == "*"
