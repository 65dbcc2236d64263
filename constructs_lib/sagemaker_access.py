"""What every SageMaker execution role needs: its logs, metrics and the AWS container images."""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam

from .nag import acknowledge_wildcards


def image_repository_arn(image_uri: str, *, partition: str) -> str:
    """The ECR repository of an image URI (ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO:TAG)."""
    registry, _, rest = image_uri.partition("/")
    account, region = registry.split(".")[0], registry.split(".")[3]
    return f"arn:{partition}:ecr:{region}:{account}:repository/{rest.split(':')[0].split('@')[0]}"


def allow_sagemaker_basics(role: iam.Role, *, image_uri: str | None = None) -> None:
    """`image_uri`: the one image the role pulls (its repository only); None: any AWS DLC in the region."""
    stack = Stack.of(role)
    log_groups = stack.format_arn(service="logs", resource="log-group", resource_name="/aws/sagemaker/*",
                                  arn_format=ArnFormat.COLON_RESOURCE_NAME)
    # AWS Deep Learning Containers live in AWS-owned accounts that differ by region and framework.
    images = image_repository_arn(image_uri, partition=stack.partition) if image_uri \
        else f"arn:{stack.partition}:ecr:{stack.region}:*:repository/*"
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
        resources=[log_groups],
    ))
    role.add_to_principal_policy(iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"]))
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
        resources=[images],
    ))
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["cloudwatch:PutMetricData"], resources=["*"],
        conditions={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*", "AWS/SageMaker"]}},
    ))
    wildcards = [log_groups, "*"] + ([] if image_uri else [images])
    acknowledge_wildcards(role, resources=wildcards, reason=(
        "SageMaker basics: logs confined to /aws/sagemaker/* log groups; ecr:GetAuthorizationToken and "
        "cloudwatch:PutMetricData have no resource-level permissions (the latter is limited by namespace)"
        + ("." if image_uri else "; AWS Deep Learning Container images live in AWS-owned accounts that vary by "
           "region and framework, and the job's image is chosen at submission.")))


def allow_vpc_access(role: iam.Role) -> None:
    """SageMaker jobs and HyperPod attach network interfaces in our subnet on the role's behalf."""
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
                 "ec2:DeleteNetworkInterfacePermission", "ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs",
                 "ec2:DescribeDhcpOptions", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups",
                 "ec2:DetachNetworkInterface", "ec2:CreateTags"],
        resources=["*"]))
    acknowledge_wildcards(role, resources=["*"], reason=(
        "VPC mode: SageMaker creates and deletes the job's network interfaces in our private subnet; these EC2 "
        "actions take no resource ARNs that exist before the job starts (AmazonSageMakerFullAccess grants them on *)."))
