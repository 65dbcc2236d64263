"""Issue 44: the node image's bake is its own network and holds only the rights a bake needs. Its build instance
downloads from the internet for half an hour: in a group of its own (HTTPS and the package mirrors out, nothing in),
not the cluster's, which reaches every node and the file systems; its role reads no SSM parameter of the account and
writes only its own log group, evaluated with the IAM evaluator (contract_policy) as the calls the build makes."""

from __future__ import annotations

import pytest

from .contract_policy import PARTITION, Call, evaluate
from .test_runtime_contract import world_of

SOURCE = "EC2 Image Builder: build instance (SSM Agent, AWSTOE) and its logs"


@pytest.fixture(scope="module")
def huge(synth):
    return synth("huge")


def _bake_group(s):
    """The NetworkStack logical ID of the group the build instance runs in."""
    (infra,) = s.resources("TrainStack", "AWS::ImageBuilder::InfrastructureConfiguration").values()
    (group,) = infra["Properties"]["SecurityGroupIds"]
    world = world_of(s)
    train = next(name for name in world.stacks if name.endswith("TrainStack"))
    return world.lookup(world.resolve(train, group))


def test_the_bake_runs_in_its_own_group_with_nothing_in(huge):
    stack, logical = _bake_group(huge)
    resources = stack.template["Resources"]
    group = resources[logical]
    assert stack.name.endswith("NetworkStack") and "Bake" in logical, logical
    assert not group["Properties"].get("SecurityGroupIngress")
    ingress = [r for r in resources.values() if r["Type"] == "AWS::EC2::SecurityGroupIngress"]
    assert not [r for r in ingress if r["Properties"].get("GroupId", {}).get("Fn::GetAtt", [None])[0] == logical]
    # no other group admits it: not the Lustre or NFS servers, not the cluster
    assert not [r for r in ingress
                if r["Properties"].get("SourceSecurityGroupId", {}).get("Fn::GetAtt", [None])[0] == logical]
    egress = {(e["IpProtocol"], e.get("FromPort"), e.get("ToPort"), e.get("CidrIp"))
              for e in group["Properties"]["SecurityGroupEgress"]}
    assert egress == {("tcp", 443, 443, "0.0.0.0/0"), ("tcp", 80, 80, "0.0.0.0/0")}
    cluster = next(lid for lid in resources if "SecurityCluster" in lid and resources[lid]["Type"]
                   == "AWS::EC2::SecurityGroup")
    assert cluster != logical


@pytest.fixture(scope="module")
def build(huge):
    world = world_of(huge)
    role = world.role("TrainStack/NodeImage/BuildRole/Resource")
    stack, logs = world.find("TrainStack/NodeImage/BakeLogGroup/Resource", "AWS::Logs::LogGroup")
    return world, role, world.get_att(stack, logs, "Arn")


def test_the_build_role_has_no_managed_policy(huge):
    roles = huge.resources("TrainStack", "AWS::IAM::Role")
    (role,) = [r for lid, r in roles.items() if lid.startswith("NodeImageBuildRole")]
    assert not role["Properties"].get("ManagedPolicyArns")


def test_the_build_role_does_what_a_bake_needs(build):
    world, role, logs = build
    region, account = next(iter(world.stacks.values())).region, role.account
    component = f"arn:{PARTITION}:imagebuilder:{region}:{account}:component/trainstack-node-cuda-1/1.0.0/1"
    for call in (Call("ssm:UpdateInstanceInformation", f"arn:{PARTITION}:ec2:{region}:{account}:instance/i-0abc",
                      SOURCE),
                 Call("ssmmessages:OpenControlChannel", "*", SOURCE),
                 Call("ec2messages:GetMessages", "*", SOURCE),
                 Call("imagebuilder:GetComponent", component, SOURCE),
                 Call("s3:GetObject", f"arn:{PARTITION}:s3:::ec2imagebuilder-toe-{region}-prod/linux/amd64/awstoe",
                      SOURCE),
                 Call("logs:CreateLogStream", logs.removesuffix(":*") + ":log-stream:x", SOURCE),
                 Call("logs:PutLogEvents", logs.removesuffix(":*") + ":log-stream:x", SOURCE)):
        decision = evaluate(role, call, world)
        assert decision.allowed, (call.action, decision.reason)


def test_the_build_role_reads_no_parameter_and_writes_no_other_log_group(build):
    world, role, logs = build
    region = next(iter(world.stacks.values())).region
    account = role.account
    for call in (Call("ssm:GetParameter", f"arn:{PARTITION}:ssm:{region}:{account}:parameter/team/secret", SOURCE),
                 Call("ssm:GetParameters", f"arn:{PARTITION}:ssm:{region}:{account}:parameter/any", SOURCE),
                 Call("logs:PutLogEvents", f"arn:{PARTITION}:logs:{region}:{account}:log-group:/aws/imagebuilder/"
                      "another-teams-bake:log-stream:x", SOURCE),
                 Call("imagebuilder:GetComponent", f"arn:{PARTITION}:imagebuilder:{region}:999999999999:component/x/1",
                      SOURCE),
                 Call("s3:GetObject", f"arn:{PARTITION}:s3:::some-bucket/key", SOURCE)):
        assert not evaluate(role, call, world).allowed, call.action


@pytest.mark.parametrize("role_path", ["TrainStack/NodeImage/BuildRole/Resource", "TrainStack/TrainingRole/Role/Resource"])
def test_the_ssm_agent_registers_as_one_of_this_accounts_instances_only(huge, role_path):
    """The bake's and the Slurm nodes' SSM Agent: ssm:UpdateInstanceInformation takes the `instance` resource type
    (Service Authorization Reference, AWS Systems Manager), so the roles name this account's EC2 instances
    (constructs_lib/ssm_access.agent_statements) where AmazonSSMManagedInstanceCore says `*`."""
    world = world_of(huge)
    role = world.role(role_path)
    region, account = next(iter(world.stacks.values())).region, role.account
    own = Call("ssm:UpdateInstanceInformation", f"arn:{PARTITION}:ec2:{region}:{account}:instance/i-0abc", SOURCE)
    assert evaluate(role, own, world).allowed
    for resource in (f"arn:{PARTITION}:ssm:{region}:{account}:managed-instance/mi-0abc",
                     f"arn:{PARTITION}:ec2:{region}:999999999999:instance/i-0abc"):
        assert not evaluate(role, Call("ssm:UpdateInstanceInformation", resource, SOURCE), world).allowed, resource
