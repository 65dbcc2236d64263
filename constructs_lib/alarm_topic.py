"""The estate's alarm topic: SNS, encrypted with its own key, that the estate's alarms publish to and the team's
addresses are subscribed to.

CloudWatch publishes an alarm to an encrypted topic only when the key policy lets the CloudWatch service principal
use the key (kms:Decrypt and kms:GenerateDataKey*); the AWS managed SNS key's policy cannot say so, hence a customer
managed key (SNS Developer Guide, "Enable compatibility between event sources from AWS services and encrypted
topics": https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services).
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from .kept_key import kept_key


class AlarmTopic(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, emails: tuple[str, ...], description: str) -> None:
        super().__init__(scope, construct_id)
        self.key = kept_key(self, "Key", description=description)
        self.topic = sns.Topic(self, "Topic", master_key=self.key, enforce_ssl=True, display_name=description[:100])
        # Each address confirms its subscription from the email SNS sends (SNS Developer Guide, email subscriptions).
        for address in emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(address))

    def admit(self, *, stack_names: list[str]) -> None:
        """CloudWatch may publish (and use the key) on behalf of the alarms of these stacks only: the estate's own.
        An alarm CloudFormation names is "<stack name>-<logical ID>-<suffix>" (no alarm here sets AlarmName), so
        another estate's or team's alarm in the account cannot page this one's addresses (outside review R5 L6), and
        another account's cannot at all (the confused-deputy conditions aws:SourceAccount and aws:SourceArn)."""
        stack = Stack.of(self)
        alarms = [stack.format_arn(service="cloudwatch", resource="alarm", resource_name=f"{name}-*",
                                   arn_format=ArnFormat.COLON_RESOURCE_NAME) for name in stack_names]
        conditions = {"StringEquals": {"aws:SourceAccount": stack.account}, "ArnLike": {"aws:SourceArn": alarms}}
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsOfThisEstate", principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=["*"], conditions=conditions))
        # enforce_ssl writes a topic policy, which replaces SNS's default one (the account's principals may publish):
        # CloudWatch publishes as its service principal, so the policy must name it (CloudWatch User Guide,
        # "Using Amazon CloudWatch alarms", alarm actions; AWS re:Post, "Why didn't I receive an SNS notification for
        # my CloudWatch alarm trigger?": https://repost.aws/knowledge-center/cloudwatch-receive-sns-for-alarm-trigger).
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsOfThisEstate", principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["sns:Publish"], resources=[self.topic.topic_arn], conditions=conditions))
