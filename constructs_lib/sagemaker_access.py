"""What every SageMaker execution role needs: its logs, metrics and the AWS container images."""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam

from .nag import acknowledge_wildcards


def allow_sagemaker_basics(role: iam.Role) -> None:
    stack = Stack.of(role)
    log_groups = stack.format_arn(service="logs", resource="log-group", resource_name="/aws/sagemaker/*",
                                  arn_format=ArnFormat.COLON_RESOURCE_NAME)
    # AWS Deep Learning Containers live in AWS-owned accounts that differ by region and framework.
    aws_images = f"arn:{stack.partition}:ecr:{stack.region}:*:repository/*"
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
        resources=[log_groups],
    ))
    role.add_to_principal_policy(iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"]))
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
        resources=[aws_images],
    ))
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["cloudwatch:PutMetricData"], resources=["*"],
        conditions={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*", "AWS/SageMaker"]}},
    ))
    acknowledge_wildcards(role, resources=[log_groups, aws_images, "*"], reason=(
        "SageMaker basics: logs confined to /aws/sagemaker/* log groups; ecr:GetAuthorizationToken and "
        "cloudwatch:PutMetricData have no resource-level permissions (the latter is limited by namespace); "
        "AWS Deep Learning Container images live in AWS-owned accounts that vary by region."))


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
