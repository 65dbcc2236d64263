"""Shell access to nodes through SSM Session Manager: no SSH, no open port, no public IP."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam

from .nag import acknowledge_wildcards

_SESSIONS = ["ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel",
             "ssmmessages:OpenControlChannel", "ssmmessages:OpenDataChannel"]
# The SSM Agent on our own EC2 instances also takes commands over ec2messages (HyperPod's does not need it).
_COMMANDS = ["ec2messages:AcknowledgeMessage", "ec2messages:DeleteMessage", "ec2messages:FailMessage",
             "ec2messages:GetEndpoint", "ec2messages:GetMessages", "ec2messages:SendReply"]


def agent_statements(*, partition: str, region: str, account: str) -> list[iam.PolicyStatement]:
    """What the SSM Agent on one of this account's EC2 instances needs (AWS Systems Manager User Guide, "Step 2:
    Verify or add instance permissions for Systems Manager"). It registers and sends its heartbeat with
    ssm:UpdateInstanceInformation, which takes the `instance` resource type (arn:...:ec2:REGION:ACCOUNT:instance/ID)
    or `managed-instance` (Service Authorization Reference, "Actions, resources, and condition keys for AWS Systems
    Manager", https://docs.aws.amazon.com/service-authorization/latest/reference/list_awssystemsmanager.html, read
    as published in salesforce/policy_sentry policy_sentry/shared/data/docs/list_awssystemsmanager.html at 66e53f23,
    file last changed 2026-05-10): so this account's instances, where AmazonSSMManagedInstanceCore says `*`. The
    ssmmessages and ec2messages channels take no resource ARN."""
    return [
        iam.PolicyStatement(sid="SsmAgentRegisters", actions=["ssm:UpdateInstanceInformation"],
                            resources=[f"arn:{partition}:ec2:{region}:{account}:instance/*"]),
        iam.PolicyStatement(sid="SsmAgentChannels", actions=_SESSIONS + _COMMANDS, resources=["*"]),
    ]


def allow_ssm_sessions(role: iam.Role, *, agent: bool) -> None:
    """`agent`: the role is an EC2 instance's (our Slurm nodes), whose SSM Agent registers and takes commands; else
    sessions only (HyperPod's nodes, whose agent SageMaker's managed policy registers)."""
    wildcards = ["*"]
    if agent:
        stack = Stack.of(role)
        statements = agent_statements(partition=stack.partition, region=stack.region, account=stack.account)
        wildcards += [r for st in statements for r in st.resources if r != "*"]
        for statement in statements:
            role.add_to_principal_policy(statement)
    else:
        role.add_to_principal_policy(iam.PolicyStatement(actions=_SESSIONS, resources=["*"]))
    acknowledge_wildcards(role, resources=wildcards, reason=(
        "SSM Session Manager's and the agent's channels (ssmmessages, ec2messages) have no resource-level "
        "permissions; they give shell access without SSH. The agent registers as the instance it runs on, whose ID "
        "is not known before launch: this account's instances in this region."))
