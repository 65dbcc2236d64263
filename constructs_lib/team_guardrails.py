"""A team's cost guardrails: what its ML users may launch, a boundary for every role the
toolkit creates for it, and a monthly budget with alerts (80% actual, 100% forecast).

The instance limits use the `sagemaker:InstanceTypes` condition key (SageMaker IAM condition
keys: it lists every instance type a create request asks for) and `ec2:InstanceType`.
"""

from __future__ import annotations

from aws_cdk import aws_budgets as budgets
from aws_cdk import aws_iam as iam
from constructs import Construct

from .nag import acknowledge, acknowledge_wildcards

# Requests that carry instance types, and the rest of what ML users create.
SIZED_CREATES = ["sagemaker:CreateTrainingJob", "sagemaker:CreateProcessingJob", "sagemaker:CreateEndpointConfig",
                 "sagemaker:CreateNotebookInstance", "sagemaker:CreateTransformJob",
                 "sagemaker:CreateHyperParameterTuningJob", "sagemaker:CreateCluster"]
OTHER_CREATES = ["sagemaker:CreateModel", "sagemaker:CreateEndpoint", "sagemaker:AddTags"]
OWN_RESOURCE_ACTIONS = ["sagemaker:StopTrainingJob", "sagemaker:StopProcessingJob", "sagemaker:StopTransformJob",
                        "sagemaker:UpdateEndpoint", "sagemaker:DeleteEndpoint", "sagemaker:DeleteEndpointConfig",
                        "sagemaker:DeleteModel", "sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointAsync",
                        "sagemaker:StartNotebookInstance", "sagemaker:StopNotebookInstance",
                        "sagemaker:DeleteNotebookInstance", "sagemaker:CreatePresignedNotebookInstanceUrl"]
READ_ACTIONS = ["sagemaker:Describe*", "sagemaker:List*", "sagemaker:Search"]
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
        tagged = {"StringEquals": {"aws:RequestTag/team": team}}

        self.users_policy = iam.ManagedPolicy(self, "MlUsers", description=f"ML users of team {team}", statements=[
            iam.PolicyStatement(sid="CreateOnAllowedInstanceTypes", actions=SIZED_CREATES, resources=["*"], conditions={
                "ForAllValues:StringLike": {"sagemaker:InstanceTypes": ml},
                "Null": {"sagemaker:InstanceTypes": "false"}, **tagged}),
            iam.PolicyStatement(sid="CreateTagged", actions=OTHER_CREATES, resources=["*"], conditions=tagged),
            iam.PolicyStatement(sid="ManageOwn", actions=OWN_RESOURCE_ACTIONS, resources=["*"],
                                conditions={"StringEquals": {"aws:ResourceTag/team": team}}),
            iam.PolicyStatement(sid="Read", actions=READ_ACTIONS, resources=["*"]),
            iam.PolicyStatement(sid="PassTeamRoles", actions=["iam:PassRole"], resources=["*"], conditions={
                "StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com", "aws:ResourceTag/team": team}}),
        ])
        acknowledge_wildcards(self.users_policy, actions=["sagemaker:Describe*", "sagemaker:List*"], resources=["*"],
                              reason="Resource ARNs of jobs and endpoints do not exist before they are created; every "
                                     "create is bound by the team tag and the sagemaker:InstanceTypes condition, every "
                                     "change by the resource's team tag; reads are account-wide by design.")

        self.boundary = iam.ManagedPolicy(self, "Boundary", description=f"Permissions boundary of team {team}'s roles",
                                          statements=[
            iam.PolicyStatement(sid="CapOnly", actions=["*"], resources=["*"]),
            iam.PolicyStatement(sid="NoIamChanges", effect=iam.Effect.DENY, actions=IAM_WRITES, resources=["*"]),
            iam.PolicyStatement(sid="OnlyAllowedSageMakerTypes", effect=iam.Effect.DENY, actions=SIZED_CREATES,
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
