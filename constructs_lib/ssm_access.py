"""Shell access to nodes through SSM Session Manager: no SSH, no open port, no public IP."""

from __future__ import annotations

from aws_cdk import aws_iam as iam

from .nag import acknowledge_wildcards

_SESSIONS = ["ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel",
             "ssmmessages:OpenControlChannel", "ssmmessages:OpenDataChannel"]
# The SSM agent on our own EC2 nodes also registers and polls for commands (HyperPod's does not need it).
_AGENT = ["ssm:UpdateInstanceInformation", "ec2messages:GetMessages", "ec2messages:AcknowledgeMessage",
          "ec2messages:SendReply", "ec2messages:DeleteMessage", "ec2messages:FailMessage", "ec2messages:GetEndpoint"]


def allow_ssm_sessions(role: iam.Role, *, agent: bool) -> None:
    role.add_to_principal_policy(iam.PolicyStatement(actions=(_AGENT if agent else []) + _SESSIONS, resources=["*"]))
    acknowledge_wildcards(role, resources=["*"], reason=(
        "SSM Session Manager and agent actions have no resource-level permissions (AmazonSSMManagedInstanceCore "
        "grants the same on *); they give shell access without SSH."))
