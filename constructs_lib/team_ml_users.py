"""What a team's ML users may do in SageMaker: create on allowed instance types, in the team's subnet and
security group, with the team's key, tagged with the team; and change, invoke or delete only what carries
the team's tag, which they can neither change nor remove.

Every condition key below is one the IAM service authorization reference lists for the action
("Actions, resources, and condition keys for Amazon SageMaker AI"): sagemaker:InstanceTypes,
sagemaker:VpcSubnets, sagemaker:VpcSecurityGroupIds, sagemaker:VolumeKmsKey, sagemaker:OutputKmsKey,
sagemaker:NetworkIsolation, sagemaker:DirectInternetAccess, sagemaker:RootAccess, and on AddTags
sagemaker:TaggingAction, which is present only when the tags come with a create request.

Reads are the team's own too: every Describe*/List* action whose resource type carries aws:ResourceTag is
allowed on the team's tag only (workloads/catalog/sagemaker_reads.yaml, from the same reference); the List
actions that take no resource (Resource "*") are allowed for the kinds the team creates, and Search only with
the team's tag as its visibility condition.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from aws_cdk import aws_iam as iam
from constructs import Construct

from workloads.packaged import read_packaged_yaml

from .nag import acknowledge_wildcards
from .team_guardrails import SIZED_CREATES, instance_patterns

# HyperPod clusters are the estate's (TrainStack builds them in the team's subnet, security group and key);
# CreateCluster takes none of the VPC or key condition keys the jobs below are bound by, so ML users get none.
SIZED_USER_CREATES = [a for a in SIZED_CREATES if a != "sagemaker:CreateCluster"]
OTHER_CREATES = ["sagemaker:CreateModel", "sagemaker:CreateEndpoint"]
OWN_RESOURCE_ACTIONS = ["sagemaker:StopTrainingJob", "sagemaker:StopProcessingJob", "sagemaker:StopTransformJob",
                        "sagemaker:UpdateEndpoint", "sagemaker:DeleteEndpoint", "sagemaker:DeleteEndpointConfig",
                        "sagemaker:DeleteModel", "sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointAsync",
                        "sagemaker:StartNotebookInstance", "sagemaker:StopNotebookInstance",
                        "sagemaker:DeleteNotebookInstance", "sagemaker:CreatePresignedNotebookInstanceUrl"]
# Every tagged read action (by the catalog's facts), scoped by the team tag; an action whose resource carries no
# tag fails the condition, so it is never granted.
OWN_READ_ACTIONS = ["sagemaker:Describe*", "sagemaker:List*"]
READS_FILE = Path(__file__).resolve().parent.parent / "workloads" / "catalog" / "sagemaker_reads.yaml"
# Jobs that run containers in a VPC of their own choosing; they must choose the team's.
IN_VPC = ["sagemaker:CreateTrainingJob", "sagemaker:CreateProcessingJob", "sagemaker:CreateHyperParameterTuningJob",
          "sagemaker:CreateNotebookInstance"]
# Jobs whose containers can be cut off the network (EnableNetworkIsolation); SageMaker still moves their data.
ISOLATED = ["sagemaker:CreateTrainingJob", "sagemaker:CreateProcessingJob", "sagemaker:CreateHyperParameterTuningJob"]
WITH_OUTPUT_KEY = [*ISOLATED, "sagemaker:CreateTransformJob"]
WITH_VOLUME_KEY = [*WITH_OUTPUT_KEY, "sagemaker:CreateEndpointConfig", "sagemaker:CreateNotebookInstance"]
TEAM_TAG = "team"


@cache
def sagemaker_reads() -> dict:
    """The reference's facts: tagged (action -> resource types), untagged, no_resource (actions on "*")."""
    return read_packaged_yaml(READS_FILE)


def resourceless_lists() -> list[str]:
    """The List actions that take no resource, for the kinds the team creates (ListTrainingJobs for
    CreateTrainingJob...): they name every team's resources, which is all IAM can scope them to; what is in a
    resource is read with its Describe action, which is scoped."""
    creates = [*SIZED_USER_CREATES, *OTHER_CREATES]
    lists = [f"sagemaker:List{a.removeprefix('sagemaker:Create')}s" for a in creates]
    unknown = [a for a in lists if a.removeprefix("sagemaker:") not in sagemaker_reads()["no_resource"]]
    assert not unknown, f"not resource-less List actions by {READS_FILE.name}: {unknown}"
    return sorted(lists)


class TeamMlUsers(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, team: str, allowed_families: list[str],
                 subnet_ids: list[str], security_group_ids: list[str], key_arn: str) -> None:
        super().__init__(scope, construct_id)
        ml, _ = instance_patterns(allowed_families)
        tagged = {"StringEquals": {f"aws:RequestTag/{TEAM_TAG}": team}}
        own = {"StringEquals": {f"aws:ResourceTag/{TEAM_TAG}": team}}

        def deny(sid: str, actions: list[str], conditions: dict) -> iam.PolicyStatement:
            return iam.PolicyStatement(sid=sid, effect=iam.Effect.DENY, actions=actions, resources=["*"],
                                       conditions=conditions)

        self.policy = iam.ManagedPolicy(self, "Policy", description=f"ML users of team {team}", statements=[
            iam.PolicyStatement(sid="CreateOnAllowedInstanceTypes", actions=SIZED_USER_CREATES, resources=["*"], conditions={
                "ForAllValues:StringLike": {"sagemaker:InstanceTypes": ml},
                "Null": {"sagemaker:InstanceTypes": "false"}, **tagged}),
            iam.PolicyStatement(sid="CreateTagged", actions=OTHER_CREATES, resources=["*"], conditions=tagged),
            # Tags that come with a create request (the create itself requires the team tag).
            iam.PolicyStatement(sid="TagOnCreate", actions=["sagemaker:AddTags"], resources=["*"], conditions={
                "Null": {"sagemaker:TaggingAction": "false"}, **tagged}),
            # Re-tagging only what already carries the team's tag: another team's resource stays out of reach.
            iam.PolicyStatement(sid="TagOwn", actions=["sagemaker:AddTags", "sagemaker:DeleteTags"], resources=["*"],
                                conditions=own),
            iam.PolicyStatement(sid="ManageOwn", actions=OWN_RESOURCE_ACTIONS, resources=["*"], conditions=own),
            iam.PolicyStatement(sid="ReadOwn", actions=OWN_READ_ACTIONS, resources=["*"], conditions=own),
            iam.PolicyStatement(sid="ListTheTeamsKinds", actions=resourceless_lists(), resources=["*"]),
            # Search returns whole resources: only with the team's tag as visibility condition (SageMaker Developer
            # Guide, "Amazon SageMaker AI identity-based policy examples", "Limit access to searchable resources with
            # visibility conditions": a policy with the key denies a Search that names no VisibilityConditions).
            iam.PolicyStatement(sid="SearchOwn", actions=["sagemaker:Search"], resources=["*"], conditions={
                "StringEquals": {f"sagemaker:SearchVisibilityCondition/Tags.{TEAM_TAG}": team}}),
            iam.PolicyStatement(sid="PassTeamRoles", actions=["iam:PassRole"], resources=["*"], conditions={
                "StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com",
                                 f"aws:ResourceTag/{TEAM_TAG}": team}}),
            # The team tag is the boundary between teams: it is never changed to another team nor removed.
            deny("TeamTagNeverChanges", ["sagemaker:AddTags"], {
                "Null": {f"aws:RequestTag/{TEAM_TAG}": "false"},
                "StringNotEquals": {f"aws:RequestTag/{TEAM_TAG}": team}}),
            deny("TeamTagNeverRemoved", ["sagemaker:DeleteTags"], {
                "ForAnyValue:StringEquals": {"aws:TagKeys": [TEAM_TAG]}}),
            # Inside the team's network.
            deny("JobsInAVpc", IN_VPC, {"Null": {"sagemaker:VpcSubnets": "true"}}),
            deny("OnlyTheTeamsSubnets", [*IN_VPC, "sagemaker:CreateModel"], {
                "ForAnyValue:StringNotEquals": {"sagemaker:VpcSubnets": subnet_ids}}),
            deny("OnlyTheTeamsSecurityGroups", [*IN_VPC, "sagemaker:CreateModel"], {
                "ForAnyValue:StringNotEquals": {"sagemaker:VpcSecurityGroupIds": security_group_ids}}),
            # A model outside a VPC (serverless has none) must be network-isolated.
            deny("ModelsInTheVpcOrIsolated", ["sagemaker:CreateModel"], {
                "Null": {"sagemaker:VpcSubnets": "true"}, "BoolIfExists": {"sagemaker:NetworkIsolation": "false"}}),
            deny("JobsNetworkIsolated", ISOLATED, {"BoolIfExists": {"sagemaker:NetworkIsolation": "false"}}),
            # With the team's key: always for outputs; for volumes wherever a key is given (instance types with
            # local NVMe take none: SageMaker encrypts those with a hardware module).
            deny("OutputsWithTheTeamsKey", WITH_OUTPUT_KEY, {"ArnNotEquals": {"sagemaker:OutputKmsKey": key_arn}}),
            # (ArnNotEqualsIfExists would also deny the request that names no key: IfExists holds when absent.)
            deny("VolumesWithTheTeamsKey", WITH_VOLUME_KEY, {"Null": {"sagemaker:VolumeKmsKey": "false"},
                                                             "ArnNotEquals": {"sagemaker:VolumeKmsKey": key_arn}}),
            # Notebooks: no direct internet access, no root.
            deny("NotebooksWithoutInternet", ["sagemaker:CreateNotebookInstance"],
                 {"StringNotEqualsIfExists": {"sagemaker:DirectInternetAccess": "Disabled"}}),
            deny("NotebooksWithoutRoot", ["sagemaker:CreateNotebookInstance"],
                 {"StringNotEqualsIfExists": {"sagemaker:RootAccess": "Disabled"}}),
        ])
        acknowledge_wildcards(self.policy, actions=["sagemaker:Describe*", "sagemaker:List*"], resources=["*"],
                              reason="Resource ARNs of jobs and endpoints do not exist before they are created; every "
                                     "create is bound by the team tag, instance types, subnet, security group and key "
                                     "conditions, every change and every read by the resource's own team tag; the "
                                     "resource-less List actions are named one by one.")
