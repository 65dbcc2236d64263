"""Security groups of the training cluster and its file systems. Nothing accepts 0.0.0.0/0.

- cluster: EFA needs all-protocol ingress AND egress to the group itself (EFA user guide,
  "Prepare an EFA-enabled security group"); Slurm (PCS controller <-> nodes) rides on the same
  self-rule. Out: HTTPS (SSM, S3, ECR, PCS) and HTTP (OS package mirrors) through the NAT.
- lustre: TCP 988 and 1018-1023 from the cluster and from the file servers themselves, and out to the same two
  groups only, as the FSx for Lustre User Guide lists them ("File system access control with Amazon VPC":
  awsdocs/amazon-fsx-lustre-user-guide doc_source/limit-access-security-groups.md at 4150cddc, "outbound rules ...
  between Amazon FSx for Lustre file servers and Lustre clients, and between Lustre file servers").
- nfs: TCP 2049 from the cluster (EFS shared home).
- bake: the node image's build instance (node_image.py): HTTPS out (PCS, CloudWatch agent, PyPI, SSM, S3) and HTTP
  to the OS package mirrors (Ubuntu's are HTTP; apt checks their signed InRelease), nothing in. Not the cluster's
  group: the bake downloads from the internet and must not sit beside the nodes and the file systems meanwhile.
- workspace: notebooks, the estate's models and ML users' models: HTTPS out only (S3, SageMaker, ECR), nothing in.
  Not the cluster's group, whose all-traffic self-rule would put a notebook next to every node and the file systems
  on every port. Here, not in the InferenceStack: SageMaker's network interfaces outlive an endpoint by minutes, and
  deleting a group they use fails (DependencyViolation, aws-cloudformation coverage roadmap issue 1327).
"""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from .nag import acknowledge

LUSTRE_PORTS = (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023))


class ClusterSecurityGroups(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc) -> None:
        super().__init__(scope, construct_id)
        self.cluster = ec2.SecurityGroup(self, "Cluster", vpc=vpc, allow_all_outbound=False,
                                         description="Training nodes: EFA and Slurm among themselves, HTTP(S) out")
        self.cluster.add_ingress_rule(self.cluster, ec2.Port.all_traffic(), "EFA and Slurm between nodes")
        acknowledge(self.cluster, "NIST.800.53.R5-EC2RestrictedCommonPorts",
                    "The only all-traffic rule is the group to itself: EFA needs all protocols between the nodes of "
                    "one cluster (EC2 user guide, \"Prepare an EFA-enabled security group\"); nothing outside the "
                    "group is admitted on any port.")
        self.cluster.add_egress_rule(self.cluster, ec2.Port.all_traffic(), "EFA between nodes (egress rule required)")
        self.cluster.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS to SSM, S3, ECR and PCS")
        self.cluster.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(80), "HTTP to OS package mirrors")

        self.lustre = ec2.SecurityGroup(self, "Lustre", vpc=vpc, allow_all_outbound=False,
                                        description="FSx for Lustre: Lustre traffic from the cluster only")
        # The rules to the clients are written in the group itself (its SecurityGroupEgress, by the cluster group's
        # ID): CloudFormation gives a group all outbound traffic unless its own SecurityGroupEgress names a rule
        # (AWS::EC2::SecurityGroup: "if you do not add egress rules, we add egress rules that allow all outbound"),
        # and separate SecurityGroupEgress resources, which a rule to the group itself must be, do not count.
        clients = ec2.Peer.security_group_id(self.cluster.security_group_id)
        for port in LUSTRE_PORTS:
            self.lustre.add_ingress_rule(self.cluster, port, "Lustre from the cluster")
            self.lustre.add_ingress_rule(self.lustre, port, "Lustre between file servers")
            self.lustre.add_egress_rule(self.lustre, port, "Lustre between file servers")
            self.lustre.add_egress_rule(clients, port, "Lustre to the clients")
            self.cluster.add_egress_rule(self.lustre, port, "Lustre to FSx")
            self.cluster.add_ingress_rule(self.lustre, port, "Lustre from FSx")

        self.nfs = ec2.SecurityGroup(self, "Nfs", vpc=vpc, allow_all_outbound=False,
                                     description="EFS shared home: NFS from the cluster only")
        self.nfs.add_ingress_rule(self.cluster, ec2.Port.tcp(2049), "NFS from the cluster")
        self.cluster.add_egress_rule(self.nfs, ec2.Port.tcp(2049), "NFS to the shared home")

        self.bake = ec2.SecurityGroup(self, "Bake", vpc=vpc, allow_all_outbound=False,
                                      description="Node image bake: HTTPS and package mirrors out, nothing in")
        self.bake.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS to PCS, PyPI, SSM, S3")
        self.bake.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(80), "HTTP to OS package mirrors (signed)")

        self.workspace = ec2.SecurityGroup(self, "Workspace", vpc=vpc, allow_all_outbound=False,
                                           description="Notebooks and ML user models: HTTPS out only, nothing in")
        self.workspace.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS to S3, SageMaker and ECR")
