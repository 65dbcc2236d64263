"""What SageMaker does with a model's role when it hosts or transforms in our VPC with our volume key
(issue 22, items 2 and 3), asked of the synthesized policies with the IAM evaluator of contract_policy.

The expectations are the documents', written here from them (not from constructs_lib, so the two can disagree):
- SageMaker Developer Guide, "How to use SageMaker AI execution roles", "CreateModel API: Execution Role
  Permissions" (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-roles.html): "If you specify a private
  VPC for your model, add the following permissions" -- MODEL_VPC_ACTIONS, read from the contract table.
- SageMaker Developer Guide, "Amazon SageMaker AI API Permissions: Actions, Permissions, and Resources Reference"
  (https://docs.aws.amazon.com/sagemaker/latest/dg/api-permissions-reference.html): CreateTransformJob needs
  kms:CreateGrant for a TransformResources.VolumeKmsKeyId unless "the associated role" (the model's) has a policy
  that permits it; SageMaker API Reference, RecommendationJobInputConfig.VolumeKmsKeyId: "The SageMaker execution
  role must have kms:CreateGrant permission in order to encrypt data on the storage volume of the endpoints".
  EBS asks for the grant for an AWS resource (kms:GrantIsForAWSResource true), which is all the role may do.
"""

from __future__ import annotations

import json

import pytest

from .conftest import SERVING_VARIANTS, VARIANTS
from .test_runtime_contract import world_of
from .contract_calls import TABLE
from .contract_policy import PARTITION, Call, Stack, World, evaluate

# The document's list, kept once with its source in the contract table (CreateModel with VpcConfig).
MODEL_VPC_ACTIONS = tuple(TABLE["types"]["AWS::SageMaker::Model"]["options"]["VpcConfig"]["actions"])
ROLES_DOC = "SageMaker Developer Guide, How to use SageMaker AI execution roles, CreateModel API: Execution Role Permissions"
KMS_DOC = "SageMaker API permissions reference (CreateTransformJob); API Reference RecommendationJobInputConfig"


@pytest.fixture(scope="module", params=SERVING_VARIANTS)
def inference_world(request, synth) -> tuple[World, Stack]:
    workload, overrides = VARIANTS[request.param]
    world = world_of(synth(workload, overrides))
    return world, world.stacks[next(n for n in world.stacks if n.endswith("InferenceStack"))]


def _model_role(world: World, stack: Stack, model_logical: str):
    role_logical = stack.template["Resources"][model_logical]["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0]
    return world.role(stack.paths[role_logical])


def _ec2_arn(stack: Stack, resource: str, rid: str) -> str:
    return f"arn:{PARTITION}:ec2:{stack.region}:{stack.account}:{resource}/{rid}"


def test_models_in_the_vpc_may_attach_interfaces_in_their_subnets_only(inference_world):
    world, stack = inference_world
    vpc = _ec2_arn(stack, "vpc", world.ref(*world.find("NetworkStack/Network/Vpc/Resource", "AWS::EC2::VPC")))
    ours, theirs = {"ec2:Vpc": vpc}, {"ec2:Vpc": _ec2_arn(stack, "vpc", "vpc-0ther")}
    eni = _ec2_arn(stack, "network-interface", "eni-0123456789abcdef0")
    problems, checked = [], 0
    for logical, r in stack.template["Resources"].items():
        vpc_config = r.get("Properties", {}).get("VpcConfig") if r["Type"] == "AWS::SageMaker::Model" else None
        if not vpc_config:
            continue
        checked += 1
        role = _model_role(world, stack, logical)
        subnets = [_ec2_arn(stack, "subnet", world.resolve(stack.name, s)) for s in vpc_config["Subnets"]]
        groups = [_ec2_arn(stack, "security-group", world.resolve(stack.name, g)) for g in vpc_config["SecurityGroupIds"]]
        allowed = [Call("ec2:CreateNetworkInterface", r, ROLES_DOC, context=ours) for r in (*subnets, *groups, eni)]
        allowed += [Call(a, eni, ROLES_DOC, context=ours) for a in MODEL_VPC_ACTIONS
                    if a.split(":")[1].startswith(("Create", "Delete")) and a != "ec2:CreateNetworkInterface"]
        allowed += [Call(a, "*", ROLES_DOC) for a in MODEL_VPC_ACTIONS if a.split(":")[1].startswith("Describe")]
        assert {c.action for c in allowed} == set(MODEL_VPC_ACTIONS)
        denied = [Call("ec2:CreateNetworkInterface", _ec2_arn(stack, "subnet", "subnet-0ther"), ROLES_DOC,
                       context=theirs, why="only our subnets"),
                  Call("ec2:DeleteNetworkInterface", eni, ROLES_DOC, context=theirs, why="only interfaces in our VPC")]
        problems += [f"{logical}: {c} refused ({d.reason})" for c in allowed
                     if not (d := evaluate(role, c, world)).allowed]
        problems += [f"{logical}: {c} allowed" for c in denied if evaluate(role, c, world).allowed]
    assert checked, "no model in the VPC: nothing was checked"
    assert not problems, "\n".join(problems)


def _volume_keys(world: World, stack: Stack) -> list[tuple[str, str, str]]:
    """(what, model logical ID, key ARN) for every ML storage volume encrypted with a key of ours."""
    models = {world.get_att(stack, lid, "ModelName"): lid for lid, r in stack.template["Resources"].items()
              if r["Type"] == "AWS::SageMaker::Model"}
    out = []
    for logical, r in stack.template["Resources"].items():
        props = r.get("Properties", {})
        if r["Type"] == "AWS::SageMaker::EndpointConfig" and "KmsKeyId" in props:
            key = world.resolve(stack.name, props["KmsKeyId"])
            out += [(logical, v["ModelName"]["Fn::GetAtt"][0], key) for v in props["ProductionVariants"]]
        if r["Type"] == "AWS::StepFunctions::StateMachine":
            definition = json.loads(world.resolve(stack.name, props["DefinitionString"]))
            for state in definition["States"].values():
                key = state.get("Parameters", {}).get("TransformResources", {}).get("VolumeKmsKeyId")
                if key:
                    out.append((logical, models[state["Parameters"]["ModelName"]], key))
    return out


def test_volume_keys_let_the_model_role_grant_to_aws_resources_only(inference_world):
    world, stack = inference_world
    problems = []
    for what, model, key in _volume_keys(world, stack):
        role = _model_role(world, stack, model)
        grant = Call("kms:CreateGrant", key, KMS_DOC, context={"kms:GrantIsForAWSResource": "true"})
        if not (d := evaluate(role, grant, world)).allowed:
            problems.append(f"{what} ({model}): {grant} refused ({d.reason})")
        other = Call("kms:CreateGrant", key, KMS_DOC, context={"kms:GrantIsForAWSResource": "false"})
        if evaluate(role, other, world).allowed:
            problems.append(f"{what} ({model}): a grant to a principal of the role's choosing is allowed")
    assert not problems, "\n".join(problems)


def test_every_kind_with_a_volume_key_is_checked(synth):
    """The checks above see both places a volume key is set: huge's real-time endpoint (inf2, no local storage) and
    small's batch transform (m5)."""
    found = set()
    for workload in ("huge", "small"):
        world = world_of(synth(workload))
        found |= {world.stacks["InferenceStack"].template["Resources"][what]["Type"]
                  for what, _, _ in _volume_keys(world, world.stacks["InferenceStack"])}
    assert found == {"AWS::SageMaker::EndpointConfig", "AWS::StepFunctions::StateMachine"}, found
