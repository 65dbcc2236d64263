from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from constructs_lib.training_role import DATASET_PREFIX, TrainingRole
from workloads.planner import TrainingPlan

from .base import EstateStack

_INPUT_MODE = {"s3-file": "File", "s3-fastfile": "FastFile", "fsx-lustre": "FSxLustre", "efs": "EFS"}


class TrainStack(EstateStack):
    def __init__(self, scope: Construct, construct_id: str, *, availability_zone: str, training: TrainingPlan,
                 bucket: s3.IBucket, key: kms.IKey, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, availability_zone=availability_zone, **kwargs)
        service = "ec2" if training.orchestrator == "slurm" else "sagemaker"
        self.role = TrainingRole(self, "TrainingRole", service=service, bucket=bucket).role
        cdk.CfnOutput(self, "TrainingRoleArn", value=self.role.role_arn)
        cdk.CfnOutput(self, "Cluster", value=f"{training.instance_count} x {training.instance_type} "
                                             f"({training.orchestrator})")
        cdk.CfnOutput(self, "InputMode", value=_INPUT_MODE[training.storage],
                      description="How training reads the dataset")
        cdk.CfnOutput(self, "DatasetPrefix", value=DATASET_PREFIX,
                      description="Training reads s3://<DataStack.DatasetBucketName>/" + DATASET_PREFIX)
