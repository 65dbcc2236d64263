"""The dataset bucket (KMS, TLS only, versioned, private, access-logged) and its access-log bucket (SSE-S3, versioned)."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from workloads.planning.layout import INCOMPLETE_UPLOAD_DAYS, NONCURRENT_DAYS

from .lifecycle import KEPT
from .nag import acknowledge

REPLICATION_REASON = ("One region by design: the estate, its cluster and its file system live in one region and AZ. "
                      "The bucket is versioned and retained; cross-region replication needs a second-region bucket "
                      "and key, which is an account decision outside this estate.")
# S3 delivers server access logs only into a destination bucket whose default encryption is SSE-S3: "You can use
# default bucket encryption on the destination bucket only if you use server-side encryption with Amazon S3 managed
# keys (SSE-S3) ... Default server-side encryption with AWS Key Management Service (AWS KMS) keys (SSE-KMS) is not
# supported." (Amazon S3 User Guide, "Enabling Amazon S3 server access logging",
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/enable-server-access-logging.html)
ACCESS_LOG_ENCRYPTION_REASON = (
    "The server access log destination bucket: S3 supports only SSE-S3 (AES-256) default encryption there, not SSE-KMS "
    "(Amazon S3 User Guide, \"Enabling Amazon S3 server access logging\"). The logs are still encrypted at rest, and the "
    "bucket is private, TLS-only and takes logs from this account only.")


def private_bucket(scope: Construct, construct_id: str, *, key: kms.IKey | None, access_logs: s3.IBucket | None,
                   log_prefix: str | None = None, lifecycle_rules: list[s3.LifecycleRule] | None = None) -> s3.Bucket:
    """A TLS-only, versioned, private bucket that outlives its stack, with its policy (lifecycle.py): encrypted with
    `key` and access-logged into `access_logs`; or, given neither, the access-log destination itself, which S3 wants
    SSE-S3 encrypted (ACCESS_LOG_ENCRYPTION_REASON) and which logging into itself would loop."""
    destination = access_logs is None
    if destination != (key is None):
        raise ValueError(f"{construct_id}: a bucket takes a key and an access-log bucket, or neither (the log destination)")
    bucket = s3.Bucket(
        scope, construct_id,
        encryption=s3.BucketEncryption.S3_MANAGED if destination else s3.BucketEncryption.KMS,
        encryption_key=key,
        bucket_key_enabled=None if destination else True,
        enforce_ssl=True,
        versioned=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        server_access_logs_bucket=access_logs,
        server_access_logs_prefix=log_prefix,
        # A versioned bucket keeps every overwritten object unless a rule expires it; by default a month.
        lifecycle_rules=lifecycle_rules or [s3.LifecycleRule(
            id="Noncurrent", noncurrent_version_expiration=Duration.days(dict(NONCURRENT_DAYS)[""]),
            abort_incomplete_multipart_upload_after=Duration.days(INCOMPLETE_UPLOAD_DAYS))],
        removal_policy=KEPT,
    )
    # The policy (TLS only; who may write logs) stays with the kept bucket: a bucket left after its stack is deleted
    # still refuses plain HTTP and still takes the access logs of the kept dataset bucket.
    bucket.policy.apply_removal_policy(KEPT)
    if key is not None:  # not the log destination
        only_with_key(bucket, key)
    if destination:
        acknowledge(bucket, "AwsSolutions-S1", "This is the access-log target bucket; logging it into itself would loop.")
        acknowledge(bucket, "NIST.800.53.R5-S3DefaultEncryptionKMS", ACCESS_LOG_ENCRYPTION_REASON)
    acknowledge(bucket, "NIST.800.53.R5-S3BucketReplicationEnabled", REPLICATION_REASON)
    return bucket


def only_with_key(bucket: s3.Bucket, key: kms.IKey) -> None:
    """Objects are written with the bucket's key or none named (the default encryption then applies it): an upload
    naming SSE-S3 (AES256), DSSE or another KMS key is refused, so no object here is readable without the key. A
    Deny on the headers only where the request carries them: FSx's export and a PutObject without encryption
    headers take the bucket's default, SageMaker's jobs name the key they were given (the team's: OutputKmsKey)."""
    objects = bucket.arn_for_objects("*")
    header, key_id = "s3:x-amz-server-side-encryption", "s3:x-amz-server-side-encryption-aws-kms-key-id"
    bucket.add_to_resource_policy(iam.PolicyStatement(
        sid="OnlySseKms", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()], actions=["s3:PutObject"],
        resources=[objects], conditions={"Null": {header: "false"}, "StringNotEquals": {header: "aws:kms"}}))
    bucket.add_to_resource_policy(iam.PolicyStatement(
        sid="OnlyTheBucketsKey", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()], actions=["s3:PutObject"],
        resources=[objects], conditions={"Null": {key_id: "false"}, "StringNotEquals": {key_id: key.key_arn}}))


class DatasetBucket(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, key: kms.Key) -> None:
        super().__init__(scope, construct_id)
        self.access_logs = private_bucket(self, "AccessLogs", key=None, access_logs=None, lifecycle_rules=[
            s3.LifecycleRule(expiration=Duration.days(365), noncurrent_version_expiration=Duration.days(365))])
        # aws-cdk-lib conditions its logging grant on the source bucket only when that bucket is in this stack;
        # the scripts bucket's (TrainStack) has none. The S3 user guide's logging grant names aws:SourceAccount
        # ("Enabling Amazon S3 server access logging"): no other account's bucket may log into ours.
        self.access_logs.add_to_resource_policy(iam.PolicyStatement(
            sid="S3LoggingFromThisAccountOnly", effect=iam.Effect.DENY,
            principals=[iam.ServicePrincipal("logging.s3.amazonaws.com")], actions=["s3:PutObject"],
            resources=[self.access_logs.arn_for_objects("*")],
            conditions={"StringNotEquals": {"aws:SourceAccount": Stack.of(self).account}}))
        # Old versions expire (layout.NONCURRENT_DAYS), the delete markers they leave are removed, and incomplete
        # uploads are aborted: nothing the estate stops using stays billed in the kept bucket.
        rules = [s3.LifecycleRule(id=f"Noncurrent{prefix.strip('/').title() or 'All'}", prefix=prefix or None,
                                  noncurrent_version_expiration=Duration.days(days)) for prefix, days in NONCURRENT_DAYS]
        rules.append(s3.LifecycleRule(id="Cleanup", expired_object_delete_marker=True,
                                      abort_incomplete_multipart_upload_after=Duration.days(INCOMPLETE_UPLOAD_DAYS)))
        self.bucket = private_bucket(self, "Dataset", key=key, access_logs=self.access_logs, log_prefix="dataset/",
                                     lifecycle_rules=rules)
