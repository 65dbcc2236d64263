from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from constructs_lib.team_ml_users import TeamMlUsers
from workloads.planning.teams import Team

from .estate import Estate


class MlUsersStack(cdk.Stack):
    """A team's ML users' policy. It names the team's subnet, security group and key, so it comes after the
    estate (the GuardrailsStack's boundary comes before it)."""

    def __init__(self, scope: Construct, construct_id: str, *, team: Team, estate: Estate, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        security, data = estate.network.security, estate.data
        self.users = TeamMlUsers(
            self, "MlUsers", team=team.name, allowed_families=team.allowed_instance_families,
            subnet_ids=[estate.network.network.private_subnet.subnet_id],
            security_group_ids=[security.cluster.security_group_id],
            workspace_security_group_ids=[security.workspace.security_group_id], key_arn=data.key.key_arn,
            pass_role_arns=estate.pass_role_arns(self),
            file_system_ids=[fs.file_system_id for fs in (data.lustre, data.home) if fs is not None],
            lifecycle_config_arns=[estate.train.notebook.lifecycle_config_arn] if estate.train.notebook else [])
        cdk.CfnOutput(self, "MlUsersPolicyArn", value=self.users.policy.managed_policy_arn,
                      description="Attach to the team's ML users or their SSO permission set")
