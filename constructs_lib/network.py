"""A one-AZ VPC: public subnet with the NAT gateway, private subnet for cluster, FSx and endpoints."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from .nag import acknowledge

PINNED_AZ_REASON = ("One availability zone from the workload config is the design: the EFA cluster, FSx for Lustre "
                    "and capacity reservations must share it, and synthesis makes no account lookups.")


class OneAzNetwork(Construct):
    """Everything training touches lives in one AZ: EFA traffic never crosses zones."""

    def __init__(self, scope: Construct, construct_id: str, *, availability_zone: str,
                 cidr: str = "10.0.0.0/16") -> None:
        super().__init__(scope, construct_id)
        flow_log_group = logs.LogGroup(self, "FlowLogs", retention=logs.RetentionDays.ONE_YEAR)
        self.vpc = ec2.Vpc(
            self, "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(cidr),
            availability_zones=[availability_zone],
            nat_gateways=1,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                # /18: a p5.48xlarge node takes 32 addresses (one per EFA interface).
                ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=18),
            ],
            # The restriction is a Lambda-backed custom resource; nothing here uses the default
            # security group, and the stack must also deploy where Lambda cannot run (the emulator).
            restrict_default_security_group=False,
            gateway_endpoints={"S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)},
            flow_logs={"All": ec2.FlowLogOptions(
                destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group),
                traffic_type=ec2.FlowLogTrafficType.ALL,
            )},
        )
        acknowledge(self.vpc, "CloudFormation-Validate::W3010", PINNED_AZ_REASON)
        self.private_subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        self.private_subnet: ec2.ISubnet = self.vpc.private_subnets[0]
