"""Issue 10: one team's ML users cannot reach another team's resources, and stay inside their own network
and keys; their own work is allowed. Evaluated from the synthesized teams file through the same IAM
evaluator as the run-time contracts (contract_policy), as the request context SageMaker builds for each call
(condition keys from "Actions, resources, and condition keys for Amazon SageMaker AI")."""

from __future__ import annotations

import pytest

from .contract_policy import PARTITION, Call, World, evaluate
from .test_runtime_contract import teams_world

DOC = "IAM service authorization reference, Amazon SageMaker AI condition keys"
A, B = "vision", "language"  # two teams in one account and region (config/teams.yaml)


@pytest.fixture(scope="module")
def world(teams_synth) -> World:
    return teams_world(teams_synth)


def _team(world: World, team: str) -> dict:
    def ref(path: str, kind: str) -> str:
        stack, logical = world.find(f"{team}/{path}", kind)
        return world.ref(stack, logical)

    key_stack, key = world.find(f"{team}/DataStack/DataKey/Key/Resource", "AWS::KMS::Key")
    sg_stack, sg = world.find(f"{team}/NetworkStack/Security/Cluster/Resource", "AWS::EC2::SecurityGroup")
    net, _ = world.find(f"{team}/NetworkStack/Network/Vpc/Resource", "AWS::EC2::VPC")
    return {"subnet": ref("NetworkStack/Network/Vpc/privateSubnet1/Subnet", "AWS::EC2::Subnet"),
            "sg": world.get_att(sg_stack, sg, "GroupId"),
            "key": world.get_att(key_stack, key, "Arn"), "region": net.region, "account": net.account}


def _arn(t: dict, kind: str, name: str) -> str:
    return f"arn:{PARTITION}:sagemaker:{t['region']}:{t['account']}:{kind}/{name}"


def _training_job(t: dict, team: str, **override) -> Call:
    context = {"sagemaker:InstanceTypes": ["ml.g5.12xlarge"], f"aws:RequestTag/team": team, "aws:TagKeys": ["team"],
               "sagemaker:VpcSubnets": [t["subnet"]], "sagemaker:VpcSecurityGroupIds": [t["sg"]],
               "sagemaker:OutputKmsKey": t["key"], "sagemaker:NetworkIsolation": "true"}
    context.update(override)
    for k in [k for k, v in context.items() if v is None]:
        del context[k]
    return Call("sagemaker:CreateTrainingJob", _arn(t, "training-job", "job-1"), DOC, context=context)


def _own(world: World, team: str) -> list[Call]:
    t = _team(world, team)
    endpoint = _arn(t, "endpoint", f"{team}-endpoint")
    return [
        _training_job(t, team),
        Call("sagemaker:AddTags", _arn(t, "training-job", "job-1"), DOC, why="tags that come with the create",
             context={"sagemaker:TaggingAction": "CreateTrainingJob", "aws:RequestTag/team": team,
                      "aws:TagKeys": ["team"]}),
        Call("sagemaker:CreateModel", _arn(t, "model", "m"), DOC, context={
            "aws:RequestTag/team": team, "sagemaker:VpcSubnets": [t["subnet"]],
            "sagemaker:VpcSecurityGroupIds": [t["sg"]], "sagemaker:NetworkIsolation": "true"}),
        Call("sagemaker:CreateModel", _arn(t, "model", "serverless"), DOC, why="no VPC, network-isolated",
             context={"aws:RequestTag/team": team, "sagemaker:NetworkIsolation": "true"}),
        Call("sagemaker:CreateEndpointConfig", _arn(t, "endpoint-config", "c"), DOC, why="NVMe type, no volume key",
             context={"aws:RequestTag/team": team, "sagemaker:InstanceTypes": ["ml.g5.xlarge"]}),
        Call("sagemaker:CreateNotebookInstance", _arn(t, "notebook-instance", "n"), DOC, context={
            "aws:RequestTag/team": team, "sagemaker:InstanceTypes": ["ml.m5.xlarge"],
            "sagemaker:VpcSubnets": [t["subnet"]], "sagemaker:VpcSecurityGroupIds": [t["sg"]],
            "sagemaker:VolumeKmsKey": t["key"], "sagemaker:DirectInternetAccess": "Disabled",
            "sagemaker:RootAccess": "Disabled"}),
        *[Call(a, endpoint, DOC, context={"aws:ResourceTag/team": team})
          for a in ("sagemaker:InvokeEndpoint", "sagemaker:UpdateEndpoint", "sagemaker:DeleteEndpoint")],
        Call("sagemaker:AddTags", endpoint, DOC, why="another tag on its own endpoint",
             context={"aws:ResourceTag/team": team, "aws:RequestTag/owner": "ana", "aws:TagKeys": ["owner"]}),
    ]


def _denied(world: World, team: str, other: str) -> list[Call]:
    t, o = _team(world, team), _team(world, other)
    theirs = _arn(o, "endpoint", f"{other}-endpoint")
    mine = _arn(t, "endpoint", f"{team}-endpoint")
    return [
        Call("sagemaker:AddTags", theirs, DOC, why="re-tag another team's endpoint as ours",
             context={"aws:ResourceTag/team": other, "aws:RequestTag/team": team, "aws:TagKeys": ["team"]}),
        *[Call(a, theirs, DOC, why="another team's endpoint", context={"aws:ResourceTag/team": other})
          for a in ("sagemaker:InvokeEndpoint", "sagemaker:UpdateEndpoint", "sagemaker:DeleteEndpoint",
                    "sagemaker:DeleteTags")],
        Call("sagemaker:AddTags", mine, DOC, why="hand its own endpoint to another team",
             context={"aws:ResourceTag/team": team, "aws:RequestTag/team": other, "aws:TagKeys": ["team"]}),
        Call("sagemaker:DeleteTags", mine, DOC, why="remove the team tag",
             context={"aws:ResourceTag/team": team, "aws:TagKeys": ["team"]}),
        Call("sagemaker:AddTags", _arn(t, "training-job", "j"), DOC, why="create-time tags of another team",
             context={"sagemaker:TaggingAction": "CreateTrainingJob", "aws:RequestTag/team": other,
                      "aws:TagKeys": ["team"]}),
        _training_job(t, team, **{"sagemaker:VpcSubnets": [o["subnet"]]}),
        _training_job(t, team, **{"sagemaker:VpcSecurityGroupIds": [o["sg"]]}),
        _training_job(t, team, **{"sagemaker:VpcSubnets": None, "sagemaker:VpcSecurityGroupIds": None}),
        _training_job(t, team, **{"sagemaker:OutputKmsKey": None}),
        _training_job(t, team, **{"sagemaker:OutputKmsKey": o["key"]}),
        _training_job(t, team, **{"sagemaker:VolumeKmsKey": o["key"]}),
        _training_job(t, team, **{"sagemaker:NetworkIsolation": "false"}),
        _training_job(t, team, **{"sagemaker:NetworkIsolation": None}),
        _training_job(t, team, **{"sagemaker:InstanceTypes": ["ml.p5.48xlarge"]}),
        _training_job(t, team, **{"aws:RequestTag/team": other}),
        Call("sagemaker:CreateCluster", _arn(t, "cluster", "c"), DOC, why="clusters are the estate's, not users'",
             context={"aws:RequestTag/team": team, "sagemaker:InstanceTypes": ["ml.g5.12xlarge"]}),
        Call("sagemaker:CreateModel", _arn(t, "model", "open"), DOC, why="no VPC and not isolated",
             context={"aws:RequestTag/team": team}),
        Call("sagemaker:CreateModel", _arn(t, "model", "theirs"), DOC, why="another team's subnet",
             context={"aws:RequestTag/team": team, "sagemaker:VpcSubnets": [o["subnet"]],
                      "sagemaker:VpcSecurityGroupIds": [t["sg"]], "sagemaker:NetworkIsolation": "true"}),
        *[Call("sagemaker:CreateNotebookInstance", _arn(t, "notebook-instance", "n"), DOC, why=why, context={
            "aws:RequestTag/team": team, "sagemaker:InstanceTypes": ["ml.m5.xlarge"],
            "sagemaker:VpcSubnets": [t["subnet"]], "sagemaker:VpcSecurityGroupIds": [t["sg"]],
            "sagemaker:VolumeKmsKey": t["key"], **extra})
          for why, extra in (("direct internet access", {"sagemaker:RootAccess": "Disabled"}),
                             ("root access", {"sagemaker:DirectInternetAccess": "Disabled",
                                              "sagemaker:RootAccess": "Enabled"}))],
    ]


@pytest.mark.parametrize("team, other", [(A, B), (B, A)])
def test_a_teams_own_work_is_allowed(world, team, other):
    users = world.policy_holder(f"{team}/MlUsersStack/MlUsers/Policy/Resource", f"{team}-ml-user")
    refused = [f"{c}: {evaluate(users, c, world).reason}" for c in _own(world, team)
               if not evaluate(users, c, world).allowed]
    assert not refused, "\n".join(refused)


@pytest.mark.parametrize("team, other", [(A, B), (B, A)])
def test_a_team_cannot_reach_another_teams_resources_network_or_keys(world, team, other):
    users = world.policy_holder(f"{team}/MlUsersStack/MlUsers/Policy/Resource", f"{team}-ml-user")
    allowed = [f"{c}" for c in _denied(world, team, other) if evaluate(users, c, world).allowed]
    assert not allowed, "allowed but must be denied:\n" + "\n".join(allowed)


def test_the_teams_really_differ(world):
    a, b = _team(world, A), _team(world, B)
    assert a["subnet"] != b["subnet"] and a["sg"] != b["sg"] and a["key"] != b["key"]
    assert a["account"] == b["account"] and a["region"] == b["region"]
