"""The dataset bucket (KMS, TLS only, versioned, private, access-logged) and its log bucket (versioned)."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from .nag import acknowledge

REPLICATION_REASON = ("One region by design: the estate, its cluster and its file system live in one region and AZ. "
                      "The bucket is versioned and retained; cross-region replication needs a second-region bucket "
                      "and key, which is an account decision outside this estate.")


def private_bucket(scope: Construct, construct_id: str, *, key: kms.IKey, access_logs: s3.IBucket | None,
                   log_prefix: str | None = None, lifecycle_rules: list[s3.LifecycleRule] | None = None) -> s3.Bucket:
    """A KMS-encrypted, TLS-only, versioned, private bucket that outlives its stack; access-logged
    unless it is the access-log target itself (`access_logs` None)."""
    bucket = s3.Bucket(
        scope, construct_id,
        encryption=s3.BucketEncryption.KMS,
        encryption_key=key,
        bucket_key_enabled=True,
        enforce_ssl=True,
        versioned=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        server_access_logs_bucket=access_logs,
        server_access_logs_prefix=log_prefix,
        lifecycle_rules=lifecycle_rules,
        removal_policy=RemovalPolicy.RETAIN,
    )
    if access_logs is None:
        acknowledge(bucket, "AwsSolutions-S1", "This is the access-log target bucket; logging it into itself would loop.")
    acknowledge(bucket, "NIST.800.53.R5-S3BucketReplicationEnabled", REPLICATION_REASON)
    return bucket


class DatasetBucket(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, key: kms.Key) -> None:
        super().__init__(scope, construct_id)
        # SSE-KMS on a log target works when the key lets the logging service encrypt (S3 user guide,
        # "Enabling Amazon S3 server access logging"): aws-cdk-lib adds that key policy statement for
        # logging.s3.amazonaws.com itself when a KMS bucket is a log target.
        self.access_logs = private_bucket(self, "AccessLogs", key=key, access_logs=None, lifecycle_rules=[
            s3.LifecycleRule(expiration=Duration.days(365), noncurrent_version_expiration=Duration.days(365))])
        # aws-cdk-lib conditions its logging grant on the source bucket only when that bucket is in this stack;
        # the scripts bucket's (TrainStack) has none. The S3 user guide's logging grant names aws:SourceAccount
        # ("Enabling Amazon S3 server access logging"): no other account's bucket may log into ours.
        self.access_logs.add_to_resource_policy(iam.PolicyStatement(
            sid="S3LoggingFromThisAccountOnly", effect=iam.Effect.DENY,
            principals=[iam.ServicePrincipal("logging.s3.amazonaws.com")], actions=["s3:PutObject"],
            resources=[self.access_logs.arn_for_objects("*")],
            conditions={"StringNotEquals": {"aws:SourceAccount": Stack.of(self).account}}))
        # aws-cdk-lib's key policy grant to logging.s3.amazonaws.com names no source either: the service may use the
        # data key only for this account's buckets (confused deputy; S3 user guide, "Enabling Amazon S3 server
        # access logging", and IAM user guide, "The confused deputy problem": aws:SourceAccount).
        key.add_to_resource_policy(iam.PolicyStatement(
            sid="S3LoggingKeyForThisAccountOnly", effect=iam.Effect.DENY,
            principals=[iam.ServicePrincipal("logging.s3.amazonaws.com")], actions=["kms:*"], resources=["*"],
            conditions={"StringNotEquals": {"aws:SourceAccount": Stack.of(self).account}}))
        self.bucket = private_bucket(self, "Dataset", key=key, access_logs=self.access_logs, log_prefix="dataset/")
