from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from constructs_lib.alarm_topic import AlarmTopic
from constructs_lib.cluster_security import ClusterSecurityGroups
from constructs_lib.logs_key import LogsKey
from constructs_lib.network import EstateNetwork

from .base import EstateStack


class NetworkStack(EstateStack):
    def __init__(self, scope: Construct, construct_id: str, *, availability_zone: str, second_availability_zone: str,
                 alarm_emails: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(scope, construct_id, availability_zone=availability_zone,
                         second_availability_zone=second_availability_zone, **kwargs)
        # The key of every log group of the estate: this stack comes first, so every other stack can use it.
        self.logs_key = LogsKey(self, "LogsKey", description=f"CloudWatch Logs of {self.stack_name}").key
        self.network = EstateNetwork(self, "Network", availability_zone=availability_zone,
                                     second_availability_zone=second_availability_zone, logs_key=self.logs_key)
        self.security = ClusterSecurityGroups(self, "Security", vpc=self.network.vpc)
        # The estate's alarms (TrainStack's and InferenceStack's monitors) notify this topic; it comes first too.
        self.alarms = AlarmTopic(self, "Alarms", emails=alarm_emails, description=f"Alarms of {self.stack_name}")
        self.alarm_topic = self.alarms.topic
        cdk.CfnOutput(self, "AlarmTopicArn", value=self.alarm_topic.topic_arn,
                      description="Where the estate's alarms go: aws sns subscribe --protocol email to add an address")
        cdk.CfnOutput(self, "PrivateSubnetId", value=self.network.private_subnet.subnet_id,
                      description="The training zone's private subnet: cluster, FSx and SageMaker jobs")
        cdk.CfnOutput(self, "HostingSubnetIds", value=",".join(s.subnet_id for s in self.network.hosting_subnets),
                      description="The hosted endpoints' private subnets, one per zone")
        cdk.CfnOutput(self, "ClusterSecurityGroupId", value=self.security.cluster.security_group_id)
        cdk.CfnOutput(self, "WorkspaceSecurityGroupId", value=self.security.workspace.security_group_id,
                      description="Notebooks and ML users' models: HTTPS out only")
