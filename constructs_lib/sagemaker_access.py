"""What every SageMaker execution role needs: its logs, metrics and the AWS container images."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3

from .nag import acknowledge_wildcards


def image_repository_arn(image_uri: str, *, partition: str) -> str:
    """The ECR repository of an image URI (ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO:TAG)."""
    registry, _, rest = image_uri.partition("/")
    account, region = registry.split(".")[0], registry.split(".")[3]
    return f"arn:{partition}:ecr:{region}:{account}:repository/{rest.split(':')[0].split('@')[0]}"


def allow_sagemaker_basics(role: iam.Role, *, image_uris: Sequence[str]) -> None:
    """`image_uris`: the images the role pulls (exactly their repositories, in the accounts the URIs name: ECR
    authorizes a pull on the repository); none for a role that pulls no image (HyperPod nodes). Its logs are granted
    where their group is known (allow_log_writes): never every /aws/sagemaker/* group of the account."""
    stack = Stack.of(role)
    if image_uris:
        role.add_to_principal_policy(iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"]))
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
            resources=sorted({image_repository_arn(uri, partition=stack.partition) for uri in image_uris}),
        ))
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["cloudwatch:PutMetricData"], resources=["*"],
        conditions={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*", "AWS/SageMaker"]}},
    ))
    acknowledge_wildcards(role, resources=["*"], reason=(
        "SageMaker basics: ecr:GetAuthorizationToken and cloudwatch:PutMetricData have no resource-level permissions "
        "(the latter is limited by namespace)."))


def allow_log_writes(role: iam.IRole, *, group: str, streams: str = "*") -> None:
    """Create and write the streams named `streams` (a name pattern) in the log group `group` (a name, or a pattern
    of names), and nothing else of CloudWatch Logs. SageMaker writes a container's logs as the role it runs as, so a
    role that may write every /aws/sagemaker/* group writes into other teams' endpoints and jobs too.

    Resources as the CloudWatch Logs service authorization reference types them ("Actions, resources, and condition
    keys for Amazon CloudWatch Logs", https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatchlogs.html):
    CreateLogGroup and DescribeLogStreams on log-group, CreateLogStream and PutLogEvents on log-stream
    (log-group:NAME:log-stream:STREAM), so a shared group such as /aws/sagemaker/TrainingJobs is written only under the
    streams of one's own jobs, which SageMaker names JOB-NAME/... (aws/sagemaker-python-sdk reads a job's logs with
    describe_log_streams(logStreamNamePrefix=job_name + "/"))."""
    stack = Stack.of(role)

    def arn(name: str) -> str:
        return stack.format_arn(service="logs", resource="log-group", resource_name=name,
                                arn_format=ArnFormat.COLON_RESOURCE_NAME)
    group_arn, stream_arn = arn(group), arn(f"{group}:log-stream:{streams}")
    role.add_to_principal_policy(iam.PolicyStatement(actions=["logs:CreateLogGroup", "logs:DescribeLogStreams"],
                                                     resources=[group_arn]))
    role.add_to_principal_policy(iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                                                     resources=[stream_arn]))
    acknowledge_wildcards(role, resources=[a for a in (group_arn, stream_arn) if "*" in a], reason=(
        "Log streams are named by SageMaker when it starts a container: only the streams of this role's own "
        "endpoint or jobs (by name prefix), in its own log group."))


def allow_vpc_access(role: iam.Role, *, vpc: ec2.IVpc, security_group: ec2.ISecurityGroup,
                     subnets: Sequence[ec2.ISubnet]) -> None:
    """SageMaker attaches network interfaces in our subnets on the role's behalf: only there.

    A model, job, notebook or cluster with a VPC config needs these EC2 actions on its execution role
    (SageMaker Developer Guide, "How to use SageMaker AI execution roles", "CreateModel API: Execution Role
    Permissions" and "CreateTrainingJob API: Execution Role Permissions": "If you specify a private VPC ...",
    https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-roles.html). `subnets`: every subnet the resource
    names (an endpoint model: one per AZ; a job, notebook or cluster: the training subnet).

    Scoped as the EC2 service authorization reference allows: CreateNetworkInterface on our subnets, our
    security group and interfaces in our VPC (ec2:Vpc); the other interface actions on interfaces in our VPC;
    CreateTags only as part of CreateNetworkInterface (ec2:CreateAction). Describe* take no resource.
    """
    if not subnets:
        raise ValueError("allow_vpc_access needs the subnets the role's resource attaches to")
    stack = Stack.of(role)

    def ec2_arn(resource: str, name: str) -> str:
        return stack.format_arn(service="ec2", resource=resource, resource_name=name)

    in_vpc = {"ArnEquals": {"ec2:Vpc": ec2_arn("vpc", vpc.vpc_id)}}
    interfaces = ec2_arn("network-interface", "*")
    role.add_to_principal_policy(iam.PolicyStatement(
        sid="NetworkInterfacesInOurSubnet", actions=["ec2:CreateNetworkInterface"],
        resources=[*(ec2_arn("subnet", s.subnet_id) for s in subnets),
                   ec2_arn("security-group", security_group.security_group_id), interfaces], conditions=in_vpc))
    role.add_to_principal_policy(iam.PolicyStatement(
        sid="NetworkInterfacesInOurVpc", actions=[
            "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
            "ec2:DeleteNetworkInterfacePermission", "ec2:DetachNetworkInterface"],
        resources=[interfaces], conditions=in_vpc))
    role.add_to_principal_policy(iam.PolicyStatement(
        sid="TagNewNetworkInterfaces", actions=["ec2:CreateTags"], resources=[interfaces],
        conditions={"StringEquals": {"ec2:CreateAction": "CreateNetworkInterface"}}))
    describe = ["ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions", "ec2:DescribeSubnets",
                "ec2:DescribeSecurityGroups"]
    role.add_to_principal_policy(iam.PolicyStatement(actions=describe, resources=["*"]))
    acknowledge_wildcards(role, resources=["*", interfaces], reason=(
        "VPC mode: interface IDs do not exist before SageMaker creates them, so interfaces are network-interface/* "
        "narrowed to our VPC by ec2:Vpc (and CreateTags to CreateNetworkInterface); the EC2 Describe actions take "
        "no resource ARN."))


def allow_volume_key(role: iam.IRole, *, key: kms.IKey) -> None:
    """A job, transform or endpoint whose ML storage volume is encrypted with `key`: EBS makes a grant on the key
    when SageMaker attaches the volume, so the execution role (the model's, for endpoints and transforms) needs
    kms:CreateGrant, and only for AWS resources (AWS KMS Developer Guide, "kms:GrantIsForAWSResource"), so the
    role cannot hand the key to a principal of its choosing. Sources:

    - SageMaker Developer Guide, "How to use SageMaker AI execution roles" (CreateTrainingJob and
      CreateProcessingJob: "If you specify a volume KMS key in the resource configuration ... kms:CreateGrant").
    - SageMaker Developer Guide, "Amazon SageMaker AI API Permissions: Actions, Permissions, and Resources
      Reference" (https://docs.aws.amazon.com/sagemaker/latest/dg/api-permissions-reference.html): CreateTransformJob
      and CreateTrainingJob need kms:CreateGrant for a VolumeKmsKeyId "only if ... the associated role does not have
      a policy that permits this action", so with the role holding it the caller (a Step Functions role) needs none;
      CreateEndpoint needs it "if the associated EndPointConfig has a KmsKeyId": that caller is CloudFormation, as
      the principal that deploys the stack (CDK's bootstrap execution role), outside these templates.
    - SageMaker API Reference, CreateEndpointConfig.KmsKeyId ("The KMS key policy must grant permission to the IAM
      role that you specify in your CreateEndpoint, UpdateEndpoint requests") and
      RecommendationJobInputConfig.VolumeKmsKeyId ("The SageMaker execution role must have kms:CreateGrant
      permission in order to encrypt data on the storage volume of the endpoints").
    """
    role.add_to_principal_policy(iam.PolicyStatement(
        sid="VolumeKeyGrantsForAwsResources", actions=["kms:CreateGrant"], resources=[key.key_arn],
        conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}}))


def allow_reading(role: iam.IRole, *, bucket: s3.IBucket, key: str, listing: bool) -> None:
    """Read one object (`key`), or the objects under a prefix (`key` ending in "/"), of `bucket`, and nothing
    else of it: CDK's grant_read also lists the whole bucket. `listing`: the service lists the prefix first
    (an S3Prefix data source), so s3:ListBucket is allowed for that prefix only (s3:prefix condition, S3 User
    Guide, "Amazon S3 condition key examples"). Objects under an SSE-KMS key are decrypted through S3."""
    prefix = key.endswith("/")
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["s3:GetObject"], resources=[bucket.arn_for_objects(key + "*" if prefix else key)]))
    if listing:
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [key + "*"]}}))
    if bucket.encryption_key is not None:
        bucket.encryption_key.grant_decrypt(role)
