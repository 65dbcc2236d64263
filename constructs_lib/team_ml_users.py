"""What a team's ML users may do in SageMaker: create on allowed instance types, in the team's subnet and
security group, with the team's key, tagged with the team; and change, invoke or delete only what carries
the team's tag, which they can neither change nor remove.

Every condition key below is one the IAM service authorization reference lists for the action
("Actions, resources, and condition keys for Amazon SageMaker AI"): sagemaker:InstanceTypes,
sagemaker:VpcSubnets, sagemaker:VpcSecurityGroupIds, sagemaker:VolumeKmsKey, sagemaker:OutputKmsKey,
sagemaker:NetworkIsolation, sagemaker:DirectInternetAccess, sagemaker:RootAccess, sagemaker:ModelArn,
sagemaker:FileSystemId, sagemaker:NotebookInstanceLifecycleConfigArns, and on AddTags sagemaker:TaggingAction, which
is present only when the tags come with a create request.

A create that takes another resource takes only the team's (workloads/catalog/sagemaker_references.yaml lists every
such action): what it creates is named `TEAM-...` (the resource ARN), an endpoint is created or updated only on an
endpoint config with the team's tag (the endpoint-config resource of CreateEndpoint and UpdateEndpoint), and an
endpoint config or transform job names only a `TEAM-...` model (sagemaker:ModelArn: a model ARN carries no tag, so
its name does the work; workloads/planning/teams.py refuses a team name that starts with another's name and a hyphen).

Reads are the team's own too: every Describe*/List* action whose resource type carries aws:ResourceTag is
allowed on the team's tag only (workloads/catalog/sagemaker_reads.yaml, from the same reference); the List
actions that take no resource (Resource "*") are allowed for the kinds the team creates, and Search only with
the team's tag as its visibility condition.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from workloads.packaged import read_packaged_yaml

from .nag import acknowledge_wildcards
from .team_guardrails import instance_patterns

# What each create makes (its first resource type in the reference). HyperPod clusters are the estate's (TrainStack
# builds them in the team's subnet, security group and key); ML users get no CreateCluster.
SIZED_USER_CREATES = {"sagemaker:CreateTrainingJob": "training-job", "sagemaker:CreateProcessingJob": "processing-job",
                      "sagemaker:CreateEndpointConfig": "endpoint-config",
                      "sagemaker:CreateNotebookInstance": "notebook-instance",
                      "sagemaker:CreateTransformJob": "transform-job",
                      "sagemaker:CreateHyperParameterTuningJob": "hyper-parameter-tuning-job"}
OTHER_CREATES = {"sagemaker:CreateModel": "model", "sagemaker:CreateEndpoint": "endpoint"}
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
IN_VPC_JOBS = ["sagemaker:CreateTrainingJob", "sagemaker:CreateProcessingJob", "sagemaker:CreateHyperParameterTuningJob"]
IN_VPC = [*IN_VPC_JOBS, "sagemaker:CreateNotebookInstance"]
# Jobs whose containers can be cut off the network (EnableNetworkIsolation); SageMaker still moves their data.
ISOLATED = IN_VPC_JOBS
WITH_OUTPUT_KEY = [*ISOLATED, "sagemaker:CreateTransformJob"]
WITH_VOLUME_KEY = [*WITH_OUTPUT_KEY, "sagemaker:CreateEndpointConfig", "sagemaker:CreateNotebookInstance"]
# Creates that name a model (sagemaker:ModelArn): only the team's.
NAMING_A_MODEL = ["sagemaker:CreateEndpointConfig", "sagemaker:CreateTransformJob", "sagemaker:CreateInferenceComponent"]
WITH_FILE_SYSTEM = ["sagemaker:CreateTrainingJob", "sagemaker:CreateHyperParameterTuningJob"]
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


def team_name_prefix(team: str) -> str:
    """What every name a team's ML users create starts with (and the team's `submit`/`process` jobs)."""
    return f"{team}-"


class TeamMlUsers(Construct):
    """`security_group_ids`: the jobs' group (the cluster's: distributed jobs talk among themselves);
    `workspace_security_group_ids`: notebooks' and models' (HTTPS out only). `pass_role_arns`: the team's roles that
    SageMaker runs its work as; `file_system_ids`: the team's file systems a job may mount; `lifecycle_config_arns`:
    the notebook lifecycle configurations of the team's estate."""

    def __init__(self, scope: Construct, construct_id: str, *, team: str, allowed_families: list[str],
                 subnet_ids: list[str], security_group_ids: list[str], workspace_security_group_ids: list[str],
                 key_arn: str, pass_role_arns: Sequence[str], file_system_ids: Sequence[str] = (),
                 lifecycle_config_arns: Sequence[str] = ()) -> None:
        super().__init__(scope, construct_id)
        if not pass_role_arns:
            raise ValueError("TeamMlUsers needs the roles the team's work runs as")
        ml, _ = instance_patterns(allowed_families)
        tagged = {"StringEquals": {f"aws:RequestTag/{TEAM_TAG}": team}}
        own = {"StringEquals": {f"aws:ResourceTag/{TEAM_TAG}": team}}
        stack = Stack.of(self)

        def named(kind: str, name: str = team_name_prefix(team) + "*") -> str:
            return stack.format_arn(service="sagemaker", resource=kind, resource_name=name)

        def deny(sid: str, actions: list[str], conditions: dict) -> iam.PolicyStatement:
            return iam.PolicyStatement(sid=sid, effect=iam.Effect.DENY, actions=actions, resources=["*"],
                                       conditions=conditions)

        file_systems = ({"Null": {"sagemaker:FileSystemId": "false"},
                         "StringNotEquals": {"sagemaker:FileSystemId": list(file_system_ids)}}
                        if file_system_ids else {"Null": {"sagemaker:FileSystemId": "false"}})
        lifecycle = ({"ForAnyValue:ArnNotLike": {"sagemaker:NotebookInstanceLifecycleConfigArns":
                                                 list(lifecycle_config_arns)}}
                     if lifecycle_config_arns else {"Null": {"sagemaker:NotebookInstanceLifecycleConfigArns": "false"}})
        created = sorted({named(kind) for kind in SIZED_USER_CREATES.values()})
        self.policy = iam.ManagedPolicy(self, "Policy", description=f"ML users of team {team}", statements=[
            # Only the resource each create makes, named TEAM-...: a request that also names a training plan or
            # reserved capacity (CreateTrainingJob's other resources) matches nothing here and is refused.
            iam.PolicyStatement(sid="CreateOnAllowedInstanceTypes", actions=list(SIZED_USER_CREATES),
                                resources=created, conditions={
                "ForAllValues:StringLike": {"sagemaker:InstanceTypes": ml},
                "Null": {"sagemaker:InstanceTypes": "false"}, **tagged}),
            # A serverless endpoint config names no instance type (so the statement above never matches it), and
            # needs none capped: its size is memory and concurrency, which SageMaker's own quotas bound. Its model
            # is still the team's (OnlyTheTeamsModels).
            iam.PolicyStatement(sid="CreateServerlessEndpointConfigsTagged", actions=["sagemaker:CreateEndpointConfig"],
                                resources=[named("endpoint-config")],
                                conditions={"Null": {"sagemaker:InstanceTypes": "true"}, **tagged}),
            iam.PolicyStatement(sid="CreateModelsTagged", actions=["sagemaker:CreateModel"], resources=[named("model")],
                                conditions=tagged),
            # CreateEndpoint authorizes the endpoint and the endpoint config it deploys: the config must be the team's.
            iam.PolicyStatement(sid="CreateEndpointsTagged", actions=["sagemaker:CreateEndpoint"],
                                resources=[named("endpoint")], conditions=tagged),
            iam.PolicyStatement(sid="CreateEndpointsOnOwnConfigs", actions=["sagemaker:CreateEndpoint"],
                                resources=[named("endpoint-config", "*")], conditions=own),
            # Inference components (the LLM endpoints' copies), tagged, on the team's own endpoints; their model is
            # the team's (OnlyTheTeamsModels).
            iam.PolicyStatement(sid="CreateInferenceComponentsTagged", actions=["sagemaker:CreateInferenceComponent"],
                                resources=[named("inference-component")], conditions=tagged),
            iam.PolicyStatement(sid="CreateInferenceComponentsOnOwnEndpoints",
                                actions=["sagemaker:CreateInferenceComponent"], resources=[named("endpoint", "*")],
                                conditions=own),
            # Tags that come with a create request (the create itself requires the team tag).
            iam.PolicyStatement(sid="TagOnCreate", actions=["sagemaker:AddTags"], resources=["*"], conditions={
                "Null": {"sagemaker:TaggingAction": "false"}, **tagged}),
            # Re-tagging only what already carries the team's tag: another team's resource stays out of reach.
            iam.PolicyStatement(sid="TagOwn", actions=["sagemaker:AddTags", "sagemaker:DeleteTags"], resources=["*"],
                                conditions=own),
            # Every resource of the request carries the team's tag: UpdateEndpoint's endpoint and its new config.
            iam.PolicyStatement(sid="ManageOwn", actions=OWN_RESOURCE_ACTIONS, resources=["*"], conditions=own),
            iam.PolicyStatement(sid="ReadOwn", actions=OWN_READ_ACTIONS, resources=["*"], conditions=own),
            iam.PolicyStatement(sid="ListTheTeamsKinds", actions=resourceless_lists(), resources=["*"]),
            # Search returns whole resources: only with the team's tag as visibility condition (SageMaker Developer
            # Guide, "Amazon SageMaker AI identity-based policy examples", "Limit access to searchable resources with
            # visibility conditions": a policy with the key denies a Search that names no VisibilityConditions).
            iam.PolicyStatement(sid="SearchOwn", actions=["sagemaker:Search"], resources=["*"], conditions={
                "StringEquals": {f"sagemaker:SearchVisibilityCondition/Tags.{TEAM_TAG}": team}}),
            # The roles the team's work runs as, by ARN: a tag would also reach every other role of the team (CDK's
            # handlers, the state machines'), whose rights a notebook or job could then borrow.
            iam.PolicyStatement(sid="PassTheTeamsWorkRoles", actions=["iam:PassRole"], resources=list(pass_role_arns),
                                conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}),
            # The team tag is the boundary between teams: it is never changed to another team nor removed.
            deny("TeamTagNeverChanges", ["sagemaker:AddTags"], {
                "Null": {f"aws:RequestTag/{TEAM_TAG}": "false"},
                "StringNotEquals": {f"aws:RequestTag/{TEAM_TAG}": team}}),
            deny("TeamTagNeverRemoved", ["sagemaker:DeleteTags"], {
                "ForAnyValue:StringEquals": {"aws:TagKeys": [TEAM_TAG]}}),
            # Only the team's models: a model ARN carries no tag, so the name does (sagemaker:ModelArn is one ARN).
            # Only where a model is named: an endpoint config for inference components names none, and ArnNotLike
            # on an absent key would refuse it.
            deny("OnlyTheTeamsModels", NAMING_A_MODEL, {"Null": {"sagemaker:ModelArn": "false"},
                                                        "ArnNotLike": {"sagemaker:ModelArn": named("model")}}),
            # A component is always of a named model: one given as a container (InferenceComponentSpecification's
            # Container) names none, so neither the model deny above nor any model check would apply to it.
            deny("InferenceComponentsOfAModel", ["sagemaker:CreateInferenceComponent"],
                 {"Null": {"sagemaker:ModelArn": "true"}}),
            deny("OnlyTheTeamsFileSystems", WITH_FILE_SYSTEM, file_systems),
            deny("OnlyTheTeamsNotebookLifecycles", ["sagemaker:CreateNotebookInstance"], lifecycle),
            # Inside the team's network.
            deny("JobsInAVpc", IN_VPC, {"Null": {"sagemaker:VpcSubnets": "true"}}),
            deny("OnlyTheTeamsSubnets", [*IN_VPC, "sagemaker:CreateModel", "sagemaker:CreateEndpointConfig"], {
                "ForAnyValue:StringNotEquals": {"sagemaker:VpcSubnets": subnet_ids}}),
            deny("JobsInTheTeamsSecurityGroup", IN_VPC_JOBS, {
                "ForAnyValue:StringNotEquals": {"sagemaker:VpcSecurityGroupIds": security_group_ids}}),
            # Notebooks and models in a group of their own, HTTPS out only: not the cluster's all-traffic group,
            # which would put them next to every node and the file systems on every port.
            deny("NotebooksAndModelsInTheWorkspaceGroup", ["sagemaker:CreateNotebookInstance", "sagemaker:CreateModel",
                                                           "sagemaker:CreateEndpointConfig"],
                 {"ForAnyValue:StringNotEquals": {"sagemaker:VpcSecurityGroupIds": workspace_security_group_ids}}),
            # A model outside a VPC (serverless has none) must be network-isolated.
            deny("ModelsInTheVpcOrIsolated", ["sagemaker:CreateModel"], {
                "Null": {"sagemaker:VpcSubnets": "true"}, "BoolIfExists": {"sagemaker:NetworkIsolation": "false"}}),
            # An endpoint config for inference components (it names no model; its ExecutionRoleArn, VpcConfig and
            # EnableNetworkIsolation are the components' containers'): in the VPC or isolated, as a model is. A
            # config of a model names it (sagemaker:ModelArn) and carries neither key: the model's own are checked.
            deny("ComponentConfigsInTheVpcOrIsolated", ["sagemaker:CreateEndpointConfig"], {
                "Null": {"sagemaker:ModelArn": "true", "sagemaker:VpcSubnets": "true"},
                "BoolIfExists": {"sagemaker:NetworkIsolation": "false"}}),
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
            # IMDSv2 only: a request that leaves the minimum out gets IMDSv1 (CreateNotebookInstance API,
            # InstanceMetadataServiceConfiguration), and a key absent from the request fails StringEquals, so this
            # negation refuses it too. Users get no UpdateNotebookInstance, so no later downgrade.
            deny("NotebooksImdsV2Only", ["sagemaker:CreateNotebookInstance"],
                 {"StringNotEquals": {"sagemaker:MinimumInstanceMetadataServiceVersion": "2"}}),
        ])
        acknowledge_wildcards(self.policy, actions=["sagemaker:Describe*", "sagemaker:List*"],
                              resources=["*", *created, named("model"), named("endpoint"),
                                         named("endpoint-config", "*"), named("inference-component"),
                                         named("endpoint", "*")],
                              reason="Resource ARNs of jobs and endpoints do not exist before they are created: every "
                                     "create names the TEAM- prefix and is bound by the team tag, instance types, "
                                     "subnet, security group and key conditions, every change and every read by the "
                                     "resource's own team tag; the resource-less List actions are named one by one.")
        wildcard_roles = [a for a in pass_role_arns if isinstance(a, str) and a.endswith("/*")]
        if wildcard_roles:
            acknowledge_wildcards(self.policy, resources=wildcard_roles,
                                  reason="The team's model roles by their IAM path (/TEAM-InferenceStack/models/): "
                                         "only that stack creates roles there, ML users cannot create roles (the "
                                         "boundary denies IAM changes), and naming the path keeps this policy from "
                                         "waiting for the InferenceStack, which deploys once the model exists.")
