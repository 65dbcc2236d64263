"""A SageMaker model in the private subnets (one per AZ), network-isolated, with its own least-privilege role.

The container gets the artifact and environment of its serving contract (workloads/planning/contracts.py):
a model.tar.gz through ModelDataUrl, or a Hugging Face directory copied uncompressed from its
S3 prefix to /opt/ml/model (ModelDataSource, S3Prefix, CompressionType None).
"""

from __future__ import annotations

from aws_cdk import Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from workloads.planning.contracts import ServingPlan

from ..nag import acknowledge, acknowledge_wildcards
from ..sagemaker_access import allow_reading, allow_sagemaker_basics, allow_vpc_access

C = sagemaker.CfnModel


class ServingModel(Construct):
    """`vpc` None is for serverless endpoints, which support neither VPC config nor network isolation."""

    def __init__(self, scope: Construct, construct_id: str, *, image_uri: str, serving: ServingPlan,
                 bucket: s3.IBucket, vpc: ec2.IVpc | None, subnets: list[ec2.ISubnet], role_path: str,
                 security_group: ec2.ISecurityGroup, image_tag: str | None = None) -> None:
        """`security_group`: the containers' group (HTTPS out only), made by NetworkStack: SageMaker's network
        interfaces outlive an endpoint by minutes, and a group in this stack would fail its deletion
        (DependencyViolation); NetworkStack is deleted last, after every interface is gone. `image_tag`: the tag an
        `image_uri` by digest was read for (workloads/commands/image_pins.py), kept as the model's `image-tag` tag."""
        super().__init__(scope, construct_id)
        # `role_path`: the stack's own IAM path, known at synthesis, so a team's ML users' policy can name its model
        # roles (iam:PassRole on role/PATH*) without waiting for the InferenceStack to exist.
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"), path=role_path,
                             description="SageMaker model: reads its artifact and pulls its container")
        key = serving.artifact_key
        # Its own artifact only: a model directory is listed and read under its prefix (S3Prefix), an archive read.
        allow_reading(self.role, bucket=bucket, key=key, listing=not serving.compressed)
        allow_sagemaker_basics(self.role, image_uris=[image_uri])
        if not serving.compressed:
            acknowledge_wildcards(self.role, resources=[bucket.arn_for_objects(key + "*")],
                                  reason="The objects of the model directory, under its prefix only (SageMaker copies "
                                         "every object of an S3Prefix model data source).")
        vpc_config = None
        self.network: tuple[list[str], list[str]] | None = None  # (subnet IDs, security group IDs) where in a VPC
        if vpc is not None:
            # Outbound HTTPS only (S3 via the gateway endpoint, ECR via NAT); nothing may connect in.
            self.security_group = security_group
            self.network = ([s.subnet_id for s in subnets], [self.security_group.security_group_id])
            vpc_config = C.VpcConfigProperty(security_group_ids=self.network[1], subnets=self.network[0])
            # SageMaker attaches the containers' network interfaces in these subnets as the model's role.
            allow_vpc_access(self.role, vpc=vpc, subnets=subnets, security_group=self.security_group)
        if serving.compressed:
            container = C.ContainerDefinitionProperty(image=image_uri, model_data_url=bucket.s3_url_for_object(key),
                                                      environment=serving.environment or None)
        else:
            container = C.ContainerDefinitionProperty(
                image=image_uri, environment=serving.environment or None,
                model_data_source=C.ModelDataSourceProperty(s3_data_source=C.S3DataSourceProperty(
                    s3_uri=bucket.s3_url_for_object(key), s3_data_type="S3Prefix", compression_type="None")))
        self.model = C(self, "Model", execution_role_arn=self.role.role_arn, enable_network_isolation=vpc is not None,
                       primary_container=container, vpc_config=vpc_config)
        if image_tag:
            Tags.of(self.model).add("image-tag", image_tag)
        if vpc is None:
            reason = "Serverless Inference supports neither VPC configuration nor network isolation (SageMaker " \
                     "serverless feature exclusions); this model serves only the serverless endpoint."
            acknowledge(self.model, "AwsSolutions-SM1", reason)
            acknowledge(self.model, "AwsSolutions-SM3", reason)
        # SageMaker checks the role's permissions when the model is created.
        self.model.node.add_dependency(self.role.node.find_child("DefaultPolicy"))
        self.model_name = self.model.attr_model_name
        # The model's ARN as SageMaker reports it (Ref of AWS::SageMaker::Model), which sagemaker:ModelArn carries.
        self.model_arn = self.model.ref
