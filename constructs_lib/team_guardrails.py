"""A team's cost guardrails: a boundary for every role the toolkit creates for it, and a monthly
budget with alerts (80% actual, 100% forecast). What its ML users may do is team_ml_users.py.

The instance limits use the `sagemaker:InstanceTypes` condition key (SageMaker IAM condition
keys: it lists every instance type a create request asks for) on every action whose row in the service
authorization reference lists it (workloads/catalog/sagemaker_references.yaml `sized`: the creates, and the
updates such as UpdateCluster that resize), and `ec2:InstanceType`.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from aws_cdk import aws_budgets as budgets
from aws_cdk import aws_iam as iam
from constructs import Construct

from workloads.packaged import read_packaged_yaml

from .nag import acknowledge, acknowledge_wildcards

REFERENCES_FILE = Path(__file__).resolve().parent.parent / "workloads" / "catalog" / "sagemaker_references.yaml"


@cache
def sagemaker_references() -> dict:
    """The reference's facts: `references` (Write actions whose request names another resource: their resource types
    and condition keys) and `sized` (actions whose request carries sagemaker:InstanceTypes)."""
    return read_packaged_yaml(REFERENCES_FILE)


def sized_actions() -> list[str]:
    """Every SageMaker action a request for instance types goes through, creates and updates alike."""
    return [f"sagemaker:{a}" for a in sagemaker_references()["sized"]]


IAM_WRITES = ["iam:Create*", "iam:Delete*", "iam:Put*", "iam:Attach*", "iam:Detach*", "iam:Update*", "iam:Add*",
              "iam:Remove*", "iam:Tag*", "iam:Untag*", "iam:Set*"]


def instance_patterns(families: list[str]) -> tuple[list[str], list[str]]:
    """(SageMaker patterns, EC2 patterns) for the allowed families."""
    return [f"ml.{f}.*" for f in families], [f"{f}.*" for f in families]


class TeamGuardrails(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, team: str, allowed_families: list[str],
                 monthly_budget_usd: float, alert_emails: list[str]) -> None:
        super().__init__(scope, construct_id)
        ml, ec2 = instance_patterns(allowed_families)
        self.boundary = iam.ManagedPolicy(self, "Boundary", description=f"Permissions boundary of team {team}'s roles",
                                          statements=[
            iam.PolicyStatement(sid="CapOnly", actions=["*"], resources=["*"]),
            iam.PolicyStatement(sid="NoIamChanges", effect=iam.Effect.DENY, actions=IAM_WRITES, resources=["*"]),
            iam.PolicyStatement(sid="OnlyAllowedSageMakerTypes", effect=iam.Effect.DENY, actions=sized_actions(),
                                resources=["*"], conditions={"ForAnyValue:StringNotLike": {"sagemaker:InstanceTypes": ml}}),
            iam.PolicyStatement(sid="OnlyAllowedEc2Types", effect=iam.Effect.DENY, actions=["ec2:RunInstances"],
                                resources=["arn:aws:ec2:*:*:instance/*"],
                                conditions={"StringNotLike": {"ec2:InstanceType": ec2}}),
        ])
        acknowledge_wildcards(self.boundary, actions=["*"] + IAM_WRITES, resources=["*", "arn:aws:ec2:*:*:instance/*"],
                              reason="A permissions boundary only caps: a role gets the intersection with its own "
                                     "least-privilege policy. It denies IAM changes and instance types outside the "
                                     "team's families.")
        for rule in ("NIST.800.53.R5-IAMPolicyNoStatementsWithAdminAccess",
                     "NIST.800.53.R5-IAMPolicyNoStatementsWithFullAccess"):
            acknowledge(self.boundary, rule, "A permissions boundary grants nothing: its Allow * only caps, and each "
                                             "role gets the intersection with its own least-privilege policy; its "
                                             "denies are what it adds.")

        def alert(kind: str, threshold: float) -> budgets.CfnBudget.NotificationWithSubscribersProperty:
            return budgets.CfnBudget.NotificationWithSubscribersProperty(
                notification=budgets.CfnBudget.NotificationProperty(
                    notification_type=kind, comparison_operator="GREATER_THAN", threshold=threshold,
                    threshold_type="PERCENTAGE"),
                subscribers=[budgets.CfnBudget.SubscriberProperty(subscription_type="EMAIL", address=a)
                             for a in alert_emails])

        self.budget = budgets.CfnBudget(
            self, "Budget",
            budget=budgets.CfnBudget.BudgetDataProperty(
                budget_type="COST", time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=monthly_budget_usd, unit="USD"),
                # Needs `team` activated as a cost allocation tag in the payer account.
                cost_filters={"TagKeyValue": [f"user:team${team}"]}),
            notifications_with_subscribers=[alert("ACTUAL", 80), alert("FORECASTED", 100)],
        )
