"""The dataset bucket (KMS, TLS only, versioned, private, access-logged) and its log bucket."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from .nag import acknowledge


class DatasetBucket(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self.access_logs = s3.Bucket(
            self, "AccessLogs",
            # S3 server access logging delivers only to SSE-S3 buckets.
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(365))],
            removal_policy=RemovalPolicy.RETAIN,
        )
        acknowledge(self.access_logs, "AwsSolutions-S1",
                    "This is the access-log target bucket; logging it into itself would loop.")
        self.bucket = s3.Bucket(
            self, "Dataset",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=key,
            bucket_key_enabled=True,
            enforce_ssl=True,
            versioned=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="dataset/",
            removal_policy=RemovalPolicy.RETAIN,
        )
