from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from constructs_lib.data_key import DataKey
from constructs_lib.dataset_bucket import DatasetBucket

from .base import EstateStack


class DataStack(EstateStack):
    """Stateful: retained on destroy, logical IDs independent of the workload (a test pins them)."""

    def __init__(self, scope: Construct, construct_id: str, *, availability_zone: str, workload_name: str,
                 **kwargs: Any) -> None:
        super().__init__(scope, construct_id, availability_zone=availability_zone, **kwargs)
        self.key = DataKey(self, "DataKey", description=f"Datasets and models of workload {workload_name}").key
        self.datasets = DatasetBucket(self, "Datasets", key=self.key)
        self.bucket = self.datasets.bucket
        cdk.CfnOutput(self, "DatasetBucketName", value=self.bucket.bucket_name,
                      description="Upload training data under datasets/ and the model artifact under models/")
        cdk.CfnOutput(self, "DataKeyArn", value=self.key.key_arn)
