"""The one way the estate makes a KMS key: rotated yearly, kept when its stack goes (lifecycle.py), and handing out
grants only to AWS services.

A grant lets its grantee use the key without the key policy naming it, so a principal allowed kms:CreateGrant could
hand the key to anyone. The key policy denies kms:CreateGrant unless an AWS service integrated with KMS makes the
request on the caller's behalf (kms:GrantIsForAWSResource, AWS KMS Developer Guide, "Controlling access to grants":
"only when an AWS service that is integrated with AWS KMS sends the request on the principal's behalf") or a
service principal makes it itself (aws:PrincipalIsAWSService), the statement the AWS Control Tower control
CT.KMS.PR.3 asks for. Every grant made on these keys in this estate passes it, checked against the services' own
pages (tests/test_key_grants.py evaluates each row of workloads/catalog/kms_grants.yaml against every key):

- FSx for Lustre (the file system's KmsKeyId): FSx needs kms:CreateGrant from the principal that creates the file
  system and makes the grant through FSx (FSx for Lustre User Guide, "How Amazon FSx for Lustre uses AWS KMS").
- FSx's S3 data repository service-linked role (AWSServiceRoleForFSxS3Access_*): reads and writes the SSE-KMS bucket
  through S3 (Encrypt, Decrypt, GenerateDataKey with kms:ViaService s3), and makes no grant; its key statement
  (lustre.py) allows none, so the deny takes nothing from it.
- EBS, for the ML storage volumes SageMaker attaches to training and processing jobs, endpoints, transforms and
  notebooks: EBS makes the grant on the role's (or CloudFormation's) behalf (Amazon EBS User Guide, "Requirements
  for Amazon EBS encryption": "use the kms:GrantIsForAWSResource condition key to allow the user to create grants on
  the KMS key only when the grant is created on the user's behalf by an AWS service"). The Slurm nodes' and the
  bake's root volumes use EBS's own key, not these.
- EFS (the shared home's KmsKeyId): EFS makes its grant through EFS (Amazon EFS User Guide, "AWS KMS").
- CloudWatch Logs (the logs keys), CloudWatch alarms and SNS (the alarm topic's key), S3 SSE-KMS: no grants; they
  call Encrypt/Decrypt/GenerateDataKey as their key statements allow.
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from .lifecycle import KEPT

# The statement CT.KMS.PR.3 checks for, word for word: Deny, Principal *, kms:CreateGrant, Resource *, and both keys
# false under BoolIfExists (a request without the key counts as false, so a plain call by a user is refused).
GRANTS_FOR_AWS_ONLY = "GrantsOnlyForAwsServices"


def kept_key(scope: Construct, construct_id: str, *, description: str) -> kms.Key:
    key = kms.Key(scope, construct_id, description=description, enable_key_rotation=True, removal_policy=KEPT)
    key.add_to_resource_policy(iam.PolicyStatement(
        sid=GRANTS_FOR_AWS_ONLY, effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
        actions=["kms:CreateGrant"], resources=["*"],
        conditions={"BoolIfExists": {"kms:GrantIsForAWSResource": "false", "aws:PrincipalIsAWSService": "false"}}))
    return key
