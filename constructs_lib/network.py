"""The estate's VPC: everything training touches in one AZ; hosted endpoints in that AZ and a second.

SageMaker asks for a hosted endpoint's VpcConfig to have subnets in at least two Availability Zones, so that
instances spread across zones (SageMaker Developer Guide, "Give SageMaker AI Hosted Endpoints Access to Resources
in Your Amazon VPC"). The cluster, FSx and capacity reservations keep to the first zone (EFA traffic never
crosses zones). One NAT gateway, in the first zone: the endpoint models are network-isolated and reach S3 through
the gateway endpoint, so the second zone's private subnet has no traffic that needs a NAT of its own, and a second
NAT gateway would cost an hourly charge for nothing.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Fn, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from workloads.catalog import is_zone_id

from .logs_key import kept_log_group
from .nag import acknowledge, ignore_cfn_lint

PINNED_AZ_REASON = ("The zones come from the workload config, as the design asks: the EFA cluster, FSx for Lustre "
                    "and capacity reservations share availability_zone, hosted endpoints add second_availability_zone, "
                    "and synthesis makes no account lookups.")


class EstateNetwork(Construct):
    """`private_subnet`: the training zone's (cluster, FSx, jobs); `hosting_subnets`: one private subnet per zone."""

    def __init__(self, scope: Construct, construct_id: str, *, availability_zone: str, second_availability_zone: str,
                 logs_key: kms.IKey, cidr: str = "10.0.0.0/16") -> None:
        super().__init__(scope, construct_id)
        flow_log_group = kept_log_group(self, "FlowLogs", key=logs_key)
        # The flow logs' role, assumed by the flow-logs service for this account's flow logs only (VPC User Guide,
        # "IAM role for publishing flow logs to CloudWatch Logs": aws:SourceAccount and aws:SourceArn in the trust
        # against the confused deputy); aws-cdk-lib's own role trusts the service with no condition.
        stack = Stack.of(self)
        flow_log_role = iam.Role(self, "FlowLogsRole", description="VPC flow logs write to their log group",
                                 assumed_by=iam.ServicePrincipal("vpc-flow-logs.amazonaws.com", conditions={
                                     "StringEquals": {"aws:SourceAccount": stack.account},
                                     "ArnLike": {"aws:SourceArn": stack.format_arn(
                                         service="ec2", resource="vpc-flow-log", resource_name="*",
                                         arn_format=ArnFormat.SLASH_RESOURCE_NAME)}}))
        self.vpc = ec2.Vpc(
            self, "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(cidr),
            availability_zones=[availability_zone, second_availability_zone],
            nat_gateways=1,
            subnet_configuration=[
                # The public subnet holds only the NAT gateway: nothing launched there gets a public IP.
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24,
                                        map_public_ip_on_launch=False),
                # /18: a p5.48xlarge node takes 32 addresses (one per EFA interface).
                ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=18),
            ],
            # The default security group is closed (all its rules removed, by CDK's Lambda-backed custom
            # resource): nothing here uses it, and nothing launched into it by mistake can talk.
            restrict_default_security_group=True,
            gateway_endpoints={"S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)},
            flow_logs={"All": ec2.FlowLogOptions(
                destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group, flow_log_role),
                traffic_type=ec2.FlowLogTrafficType.ALL,
            )},
        )
        acknowledge(self.vpc, "CloudFormation-Validate::W3010", PINNED_AZ_REASON)
        provider = Stack.of(self).node.find_child("Custom::VpcRestrictDefaultSGCustomResourceProvider")
        handler = provider.node.find_child("Handler")
        ignore_cfn_lint(handler, "W3005", "aws-cdk-lib adds a DependsOn on the handler's role next to the GetAtt")
        # Lambda logs to /aws/lambda/<function name> and creates it unencrypted, kept forever, on first run: made
        # first with the estate's key and retention; the custom resource (the only invocation) waits for it.
        handler_logs = kept_log_group(self, "RestrictDefaultSgHandlerLogs", key=logs_key,
                                      name=Fn.join("", ["/aws/lambda/", handler.ref]))
        self.vpc.node.find_child("RestrictDefaultSecurityGroupCustomResource").node.add_dependency(handler_logs)
        for public in self.vpc.public_subnets:  # the second zone's holds nothing at all (CDK makes one per zone)
            acknowledge(public.node.find_child("DefaultRoute"), "NIST.800.53.R5-VPCNoUnrestrictedRouteToIGW",
                        "The public subnets' route to the internet gateway is the NAT gateway's way out; they hold "
                        "nothing else, assign no public IPs, and the private subnets reach the internet only through NAT.")
        for subnet in (*self.vpc.public_subnets, *self.vpc.private_subnets):
            by_zone_id(subnet)
        self.private_subnet: ec2.ISubnet = next(s for s in self.vpc.private_subnets
                                                if s.availability_zone == availability_zone)
        self.hosting_subnets: list[ec2.ISubnet] = list(self.vpc.private_subnets)


def by_zone_id(subnet: ec2.ISubnet) -> None:
    """A zone given as an AZ ID (use2-az2) is placed by ID: AWS::EC2::Subnet takes AvailabilityZoneId instead of
    AvailabilityZone (CloudFormation template reference, AWS::EC2::Subnet; the two exclude each other), so the subnet
    lands in the same physical zone in every account with no lookup at synthesis. ec2.Vpc writes whatever zone string
    it is given into AvailabilityZone; this moves an AZ ID to the property that takes it. Zone names stay as they are."""
    if not is_zone_id(subnet.availability_zone):
        return
    cfn = subnet.node.default_child
    assert isinstance(cfn, ec2.CfnSubnet)
    cfn.add_property_deletion_override("AvailabilityZone")
    cfn.add_property_override("AvailabilityZoneId", subnet.availability_zone)
