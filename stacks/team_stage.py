"""One team's stamped estate: TEAM/GuardrailsStack first, TEAM/NetworkStack, TEAM/DataStack, ..., then
TEAM/MlUsersStack."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from workloads.planning.teams import StampedTeam

from .estate import Estate, build_estate
from .guardrails_stack import GuardrailsStack
from .ml_users_stack import MlUsersStack


class TeamStage(cdk.Stage):
    def __init__(self, scope: Construct, *, stamped: StampedTeam) -> None:
        team, plan = stamped.team, stamped.plan
        super().__init__(scope, team.name, env=cdk.Environment(account=team.account, region=team.region))
        prod = team.stage == "prod"
        self.guardrails = GuardrailsStack(self, "GuardrailsStack", team=team, termination_protection=prod,
                                          env=cdk.Environment(account=team.account, region=team.region),
                                          description=f"Guardrails and budget of team {team.name}")
        self.estate: Estate = build_estate(self, plan, account=team.account, protect_all=prod,
                                           alarm_emails=tuple(team.alarm_emails or team.budget.alert_emails),
                                           workload_args=stamped.workload_args, shared_job_logs=True)
        self.ml_users = MlUsersStack(self, "MlUsersStack", team=team, estate=self.estate, termination_protection=prod,
                                     env=cdk.Environment(account=team.account, region=team.region),
                                     description=f"What team {team.name}'s ML users may do in SageMaker")
        tags = {"team": team.name, "cost-center": team.cost_center, "workload": plan.workload.name,
                "stage": team.stage}
        # Every role the toolkit creates for the team, CDK's own included, stays inside the boundary; every resource
        # carries the team's cost tags. Applied once to the stage, whose aspects reach all of the team's own stacks
        # and nothing else (the account's shared stack is outside it: stacks/build.py): one aspect each, not one per
        # stack, as each is a round trip to jsii's node process (issue 43).
        iam.PermissionsBoundary.of(self).apply(self.guardrails.guardrails.boundary)
        for key, value in tags.items():
            cdk.Tags.of(self).add(key, value)
        _tag_raw_resources(self, tags)


def _tag_raw_resources(scope: Construct, tags: dict[str, str]) -> None:
    """CDK's custom resource providers are raw CfnResources that Tags.of cannot reach: tag their roles and
    functions directly, so every taggable resource of a team carries its cost tags."""
    for c in scope.node.find_all():
        # Only a raw CfnResource can be untaggable here (the L1 classes of roles and functions are taggable): the
        # class is known in Python, while each question to the construct is a round trip to jsii's node process.
        if type(c) is cdk.CfnResource and not cdk.TagManager.is_taggable(c) \
                and c.cfn_resource_type in ("AWS::IAM::Role", "AWS::Lambda::Function"):
            c.add_property_override("Tags", [{"Key": k, "Value": v} for k, v in tags.items()])
