"""A launch template for cluster nodes, its network interfaces derived from the instance catalog.

The interfaces come from `workloads.catalog.network_interfaces` (the EC2 guide's multi-card layout:
ENA primary, EFA-only interfaces on the cards that carry EFA), all in the cluster's private subnet and
security group. No public IP: the private subnet assigns none, and EC2 refuses AssociatePublicIpAddress
on multi-interface launches. IMDSv2 only; encrypted root.

The instances, their volumes and their network interfaces carry the tags applied to the stack (`workload`; a team's
stage adds `team`, `cost-center` and `stage`): cdk.Tags reaches the template's own resources, not what EC2 launches
from it, so the construct is taggable itself and its launch template's TagSpecifications carry what Tags.of(...).add
gave it, rendered after the Tags aspects ran. A budget that filters on the `team` tag then sees the nodes.
"""

from __future__ import annotations

from collections.abc import Sequence

import jsii
from aws_cdk import IResolvable, IResolveContext, ITaggable, TagManager, TagType
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from workloads.catalog import NetworkInterface


@jsii.implements(ITaggable)
class NodeLaunchTemplate(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, subnet: ec2.ISubnet,
                 security_group: ec2.ISecurityGroup, interfaces: Sequence[NetworkInterface], user_data: str,
                 placement_group: ec2.CfnPlacementGroup | None = None, capacity_reservation_id: str | None = None,
                 capacity_block_instance_type: str | None = None, name_tag: str, root_volume_gib: int) -> None:
        """`root_volume_gib`: at least the node image's snapshot (NodeImage's root_volume_gib)."""
        super().__init__(scope, construct_id)
        # What the Tags aspects give this construct: the launched instances' tags (filters by resource type treat
        # them as instances').
        self._tags = TagManager(TagType.KEY_VALUE, "AWS::EC2::Instance")
        L = ec2.CfnLaunchTemplate
        data = L.LaunchTemplateDataProperty(
            network_interfaces=[L.NetworkInterfaceProperty(
                network_card_index=i.card, device_index=i.device,
                interface_type=None if i.kind == "interface" else i.kind,  # omitted: an ENA interface
                subnet_id=subnet.subnet_id, groups=[security_group.security_group_id], delete_on_termination=True)
                for i in interfaces],
            # Hop limit 1: everything on a node that uses the node role (PCS agent, slurmd, user data's AWS CLI,
            # jobs from the node image's venv) runs on the host; a container behind a bridge adds a hop and would
            # need 2 (EC2 User Guide, "Configure the instance metadata options": "In a container environment, we
            # recommend setting the hop limit to 2"), so with 1 no container on a node gets the role's credentials.
            metadata_options=L.MetadataOptionsProperty(http_tokens="required", http_endpoint="enabled",
                                                       http_put_response_hop_limit=1),
            block_device_mappings=[L.BlockDeviceMappingProperty(
                device_name="/dev/sda1",
                ebs=L.EbsProperty(encrypted=True, volume_type="gp3", volume_size=root_volume_gib,
                                  delete_on_termination=True))],
            user_data=user_data,
            placement=L.PlacementProperty(group_name=placement_group.ref) if placement_group else None,
            capacity_reservation_specification=L.CapacityReservationSpecificationProperty(
                capacity_reservation_target=L.CapacityReservationTargetProperty(
                    capacity_reservation_id=capacity_reservation_id)) if capacity_reservation_id else None,
            # A Capacity Block is a market type of its own; PCS wants its instance type in the template.
            instance_market_options=L.InstanceMarketOptionsProperty(market_type="capacity-block")
            if capacity_block_instance_type else None,
            instance_type=capacity_block_instance_type,
        )
        self.template = L(self, "Template", launch_template_data=data)
        # Resolved with the template, after the Tags aspects (an override: the L1's own property mapper would not pass
        # a token through, and jsii cannot hand Lazy.any's producer its context).
        self.template.add_property_override("LaunchTemplateData.TagSpecifications", _LaunchedTags(self._tags, name_tag))
        self.template_id = self.template.ref
        self.version = self.template.attr_latest_version_number

    @property
    def tags(self) -> TagManager:
        return self._tags


# What EC2 tags at launch from a launch template's TagSpecifications (AWS::EC2::LaunchTemplate TagSpecification
# ResourceType: instance | volume | network-interface | spot-instances-request).
LAUNCHED_RESOURCES = ("instance", "volume", "network-interface")


@jsii.implements(IResolvable)
class _LaunchedTags:
    """The TagSpecifications of a node's launch: its Name and the tags the Tags aspects applied, resolved at synthesis
    (after the aspects ran), in key order."""

    def __init__(self, tags: TagManager, name: str) -> None:
        self._tags, self._name = tags, name

    @property
    def creation_stack(self) -> list[str]:
        return []

    def to_string(self) -> str:
        return f"TagSpecifications of {self._name}"

    def resolve(self, context: IResolveContext) -> list:
        tags = {**self._tags.tag_values(), "Name": self._name}
        return [{"ResourceType": kind, "Tags": [{"Key": k, "Value": tags[k]} for k in sorted(tags)]}
                for kind in LAUNCHED_RESOURCES]
