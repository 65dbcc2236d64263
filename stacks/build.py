"""The one builder: one estate, or one stage per team, for what the context asked (workloads.context.Target), with
the checks every synthesis runs. app.py and the tests call it; estate.py and team_stage.py never call back."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, NIST80053R5Checks

from constructs_lib.nag import acknowledge_inline_role_policies
from workloads.context import Target

from .estate import Estate, build_estate
from .team_stage import TeamStage


def add_checks(app: cdk.App) -> None:
    """cdk-nag AwsSolutions and NIST 800-53 rev 5 on everything; findings go to the policy validation report,
    and an unacknowledged one fails the synthesis."""
    acknowledge_inline_role_policies(app)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), NIST80053R5Checks(app))


def build(app: cdk.App, target: Target) -> list[Estate]:
    if target.teams:
        estates = [TeamStage(app, stamped=s).estate for s in target.teams]
    else:
        assert target.plan is not None
        estates = [build_estate(app, target.plan, account=target.account, named_by_workload=True)]
    add_checks(app)
    return estates
