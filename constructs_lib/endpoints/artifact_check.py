"""A deploy-time check that the model artifacts an InferenceStack serves are in the dataset bucket.

The bucket is created empty; without the artifact, SageMaker fails only when an endpoint's instances
start, after a long wait, and the stack rolls back. This custom resource fails first, in seconds, with
one line naming the missing object and how to put it there (workloads/planning/artifacts.py); every model of
the stack depends on it. On Delete it does nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from workloads.planning.artifacts import ArtifactCheck as Check

from ..deploy_time_handler import deploy_time_resource
from .artifact_check_handler import RESOURCE_TYPE

HANDLER_SOURCE = Path(__file__).with_name("artifact_check_handler.py")


class ArtifactCheck(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, bucket: s3.IBucket, checks: Sequence[Check],
                 logs_key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        # HeadObject is authorized by s3:GetObject (S3 API Reference, HeadObject, Permissions), and it returns
        # metadata only: S3 decrypts no data for it, so no KMS permission is granted. Exactly the checked objects.
        self.object_arns = [bucket.arn_for_objects(c.key) for c in checks]
        made = deploy_time_resource(
            self, role_description="Checks that the model artifacts are in the dataset bucket",
            statements=[iam.PolicyStatement(actions=["s3:GetObject"], resources=self.object_arns)],
            resource_type=RESOURCE_TYPE,
            properties={"Bucket": bucket.bucket_name,
                        "Artifacts": [{"Key": c.key, "Artifact": c.artifact, "Put": c.put_in(bucket.bucket_name)}
                                      for c in checks]},
            logs_key=logs_key, source=HANDLER_SOURCE, timeout_s=60,
            description="Deploy-time check: the model artifacts this stack serves are in the dataset bucket",
            reason=("The InferenceStack's deploy-time artifact check: CloudFormation invokes it on create and update "
                    "to HeadObject the model artifacts, and it replies in seconds."),
            network=("it calls only the S3 API, with IAM and TLS, for the objects it checks; nothing in the estate's "
                     "network"))
        self.role, self.function, self.resource = made.role, made.function, made.resource
        self.keys = [c.key for c in checks]

