from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from constructs_lib.team_guardrails import TeamGuardrails
from workloads.planning.teams import Team


class GuardrailsStack(cdk.Stack):
    """The boundary of a team's roles and its budget: deployed first, every role of the team needs it."""

    def __init__(self, scope: Construct, construct_id: str, *, team: Team, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.guardrails = TeamGuardrails(self, "Guardrails", team=team.name,
                                         allowed_families=team.allowed_instance_families,
                                         monthly_budget_usd=team.budget.monthly_usd,
                                         alert_emails=team.budget.alert_emails)
        cdk.CfnOutput(self, "BoundaryPolicyArn", value=self.guardrails.boundary.managed_policy_arn)
