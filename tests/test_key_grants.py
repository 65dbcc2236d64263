"""Issue 44 (AWS Control Tower CT.KMS.PR.3): every KMS key of the estate hands out grants only to AWS services.

A principal allowed kms:CreateGrant could otherwise give the key to anyone. Each key's policy denies it unless an AWS
service makes the request on the caller's behalf or as itself (constructs_lib/kept_key.py). The grants the estate's
services make (FSx for Lustre, EBS for SageMaker's volumes, EFS) are read from tests/sources/kms_grants.yaml with
their sources and evaluated against every key of the presets and the teams' estates with the IAM evaluator
(contract_policy), beside the same caller's own grant, which is refused."""

from __future__ import annotations

import pytest
import yaml

from constructs_lib.kept_key import GRANTS_FOR_AWS_ONLY

from .conftest import ROOT
from .contract_policy import PARTITION, Call, Principal, _action_matches, evaluate
from .test_runtime_contract import teams_world, world_of

TABLE = yaml.safe_load((ROOT / "tests" / "sources" / "kms_grants.yaml").read_text())


@pytest.fixture(scope="module")
def worlds(synth, teams_synth):
    out = {preset: world_of(synth(preset)) for preset in ("small", "intermediate", "huge")}
    out["teams"] = teams_world(teams_synth)
    return out


def _keys(world):
    for stack in world.stacks.values():
        for lid, res in stack.template["Resources"].items():
            if res["Type"] == "AWS::KMS::Key":
                yield stack, lid, world.get_att(stack, lid, "Arn")


def _every_key(worlds):
    keys = [(world, stack, lid, arn) for world in worlds.values() for stack, lid, arn in _keys(world)]
    # the data key, the network's logs and alarm keys (each estate), the account's job-logs key
    assert len(keys) >= 4 * len(worlds)
    return keys


def _deployer(account: str) -> Principal:
    """A principal of the account whose own policy allows every KMS action: CloudFormation's execution role (which
    creates the file systems and endpoints), an administrator."""
    return Principal(arn=f"arn:{PARTITION}:iam::{account}:role/cdk-hnb659fds-cfn-exec-role", account=account,
                     identity=[{"Effect": "Allow", "Action": "kms:*", "Resource": "*"}])


def test_every_key_policy_carries_the_statement_the_control_asks_for(worlds):
    """Word for word what CT.KMS.PR.3 checks: Deny, every principal, kms:CreateGrant on the key, both keys false
    under BoolIfExists."""
    for world, stack, lid, _ in _every_key(worlds):
        statements = world.resolve(stack.name, stack.template["Resources"][lid]["Properties"]["KeyPolicy"])["Statement"]
        (deny,) = [s for s in statements if s.get("Sid") == GRANTS_FOR_AWS_ONLY] or [None]
        assert deny == {"Sid": GRANTS_FOR_AWS_ONLY, "Effect": "Deny", "Principal": {"AWS": "*"},
                        "Action": "kms:CreateGrant", "Resource": "*",
                        "Condition": {"BoolIfExists": {"kms:GrantIsForAWSResource": "false",
                                                       "aws:PrincipalIsAWSService": "false"}}}, f"{stack.name}/{lid}"


@pytest.mark.parametrize("row", TABLE["grants"], ids=lambda row: row["by"])
def test_the_grants_aws_services_make_pass_every_key(worlds, row):
    for world, stack, lid, arn in _every_key(worlds):
        context = {"kms:GrantIsForAWSResource": "true", "kms:CallerAccount": stack.account,
                   "kms:ViaService": f"{row['via']}.{stack.region}.amazonaws.com"}
        decision = evaluate(_deployer(stack.account), Call("kms:CreateGrant", arn, row["title"], context), world)
        assert decision.allowed, (f"{stack.name}/{lid}", row["by"], decision.reason)


def test_a_callers_own_grant_is_refused_by_every_key(worlds):
    """The same caller, asking KMS itself (no service between): refused, even with kms:* in its own policy."""
    for world, stack, lid, arn in _every_key(worlds):
        for context in ({}, {"kms:GrantIsForAWSResource": "false", "aws:PrincipalIsAWSService": "false"}):
            call = Call("kms:CreateGrant", arn, "a grant to a principal of the caller's choosing", context)
            decision = evaluate(_deployer(stack.account), call, world)
            assert not decision.allowed and GRANTS_FOR_AWS_ONLY in decision.reason, (f"{stack.name}/{lid}", decision)
        # A service principal calling as itself is not what the deny stops (whether the key lets it is the rest of
        # the key policy's business).
        service = Principal(arn="fsx.amazonaws.com", account=stack.account, identity=[], service="fsx.amazonaws.com")
        call = Call("kms:CreateGrant", arn, "a service principal's own request", {"aws:PrincipalIsAWSService": "true"})
        assert GRANTS_FOR_AWS_ONLY not in evaluate(service, call, world).reason


def test_services_that_make_no_grant_are_given_none(worlds):
    """The rows of `no_grants` (FSx's S3 service-linked role, CloudWatch Logs, CloudWatch alarms, S3): no key statement
    but the account root's (which only delegates to IAM) allows kms:CreateGrant."""
    assert {row["by"].split(" (")[0] for row in TABLE["no_grants"]} >= {"CloudWatch Logs",
                                                                       "FSx's S3 data repository service-linked role"}
    for world, stack, lid, _ in _every_key(worlds):
        statements = world.resolve(stack.name, stack.template["Resources"][lid]["Properties"]["KeyPolicy"])["Statement"]
        granting = [s for s in statements if s["Effect"] == "Allow" and _action_matches(s, "kms:CreateGrant")]
        assert [s["Principal"] for s in granting] == [{"AWS": f"arn:{PARTITION}:iam::{stack.account}:root"}], \
            f"{stack.name}/{lid}"
