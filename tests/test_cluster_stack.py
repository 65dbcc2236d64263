"""Issue 3: the EFA cluster on Slurm (AWS PCS), FSx for Lustre and the network rules around them,
for the preset huge and every EFA family via overrides; issue 11: interfaces from the catalog's
network-card facts, and the pinned software stack in the node image; issue 31: capacity as it is
sold (on-demand, a Capacity Block, a reservation), dynamic nodes that cost nothing idle, and the
cost tags on what the nodes launch."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from constructs_lib.node_image import SLURM_VERSION
from workloads import load, plan
from workloads.catalog import load_catalog, load_software, network_interfaces
from workloads.planning.train_commands import EXAMPLES_ON_NODE

from .test_node_locks import installs
from .conftest import CAPACITY_BLOCK, P6_B300, RESERVATION, ROOT, TRN1, TRN2, VARIANTS

CAT = load_catalog()
# Each network-card layout the planner trains on, synthesized: trn2 (16 cards), p4d (4), p5 (32), p6-b200 (8) and
# p6-b300 (17, card 0 without EFA). p5en's 16-card layout is trn2's; tests/test_catalog.py derives every EFA type.
TYPES = {"trn2.48xlarge": TRN2, "p4d.24xlarge": {"training.instance_type": "p4d.24xlarge"},
         "p5.48xlarge": {"training.instance_type": "p5.48xlarge"},
         "p6-b200.48xlarge": {"training.instance_type": "p6-b200.48xlarge"}, "p6-b300.48xlarge": P6_B300,
         # Trn1 (8 cards) and Trn1n (16) on Neuron 2.28's legacy XLA stack (software.yaml `legacy`), data-parallel
         # only: a model whose whole state fits a NeuronCore (conftest TRN1).
         "trn1.32xlarge": TRN1, "trn1n.32xlarge": {**TRN1, "training.instance_type": "trn1n.32xlarge"}}


@pytest.fixture(scope="module", params=list(TYPES))
def cluster(request, synth):
    return request.param, synth("huge", TYPES[request.param])


def _by_prefix(s, stack, rtype, prefix):
    found = {k: v for k, v in s.resources(stack, rtype).items() if k.startswith(prefix)}
    assert len(found) == 1, (prefix, sorted(s.resources(stack, rtype)))
    return next(iter(found.values()))["Properties"]


def _user_data(template_data: dict) -> str:
    """The user data with CloudFormation references shown as ${...}."""
    joined = template_data["UserData"]["Fn::Base64"]
    if isinstance(joined, str):
        return joined
    return "".join(p if isinstance(p, str) else "${" + json.dumps(p) + "}" for p in joined["Fn::Join"][1])


def test_launch_template_interfaces_come_from_the_network_card_facts(cluster):
    """Checked against the catalog's facts, not the function that builds the layout (EC2 guide, "Maximize network
    bandwidth on Amazon EC2 instances with multiple network cards"): the primary (card 0, device 0) is ENA; as
    many EFA-only interfaces as the type has EFA interfaces, spread evenly over its cards, on card 0 only where
    card 0 carries EFA (p6-b300's does not), each card's devices numbered from 0 (from 1 on card 0)."""
    itype, s = cluster
    t = CAT.types[itype]
    data = _by_prefix(s, "TrainStack", "AWS::EC2::LaunchTemplate", "ComputeTemplate")["LaunchTemplateData"]
    nics = data["NetworkInterfaces"]
    at = {(n["NetworkCardIndex"], n["DeviceIndex"]): n.get("InterfaceType") for n in nics}
    assert len(at) == len(nics), "two interfaces on one card and device"
    assert (0, 0) in at and at[(0, 0)] is None  # ENA primary: an EFA-only interface cannot be primary
    efa = sorted(k for k, kind in at.items() if kind == "efa-only")
    assert len(efa) == t.efa_max_interfaces
    assert all(kind in (None, "efa-only") for kind in at.values())
    cards = sorted({c for c, _ in efa})
    assert all(0 <= c < t.network_cards for c in cards)
    assert (0 in cards) == t.efa_on_card0
    assert len(cards) == (t.network_cards if t.efa_on_card0 else t.network_cards - 1) or len(cards) == len(efa)
    per_card = {c: sorted(d for cc, d in efa if cc == c) for c in cards}
    assert len({len(d) for d in per_card.values()}) == 1, per_card
    for c, devices in per_card.items():
        first = 1 if c == 0 else 0
        assert devices == list(range(first, first + len(devices))), (c, devices)
    assert all(not n.get("AssociatePublicIpAddress") for n in nics)
    assert len({json.dumps(n["Groups"]) for n in nics}) == 1 and len({json.dumps(n["SubnetId"]) for n in nics}) == 1


def test_launch_template_hardening(cluster):
    _, s = cluster
    for prefix in ("ComputeTemplate", "LoginTemplate"):
        data = _by_prefix(s, "TrainStack", "AWS::EC2::LaunchTemplate", prefix)["LaunchTemplateData"]
        assert data["MetadataOptions"]["HttpTokens"] == "required"
        root = data["BlockDeviceMappings"][0]
        assert root["DeviceName"] == "/dev/sda1" and root["Ebs"]["Encrypted"] is True


def test_nodes_run_in_the_private_subnet_without_public_addresses(cluster):
    _, s = cluster
    subnets = s.resources("NetworkStack", "AWS::EC2::Subnet")
    private = [k for k in subnets if "private" in k]
    assert all(subnets[k]["Properties"]["MapPublicIpOnLaunch"] is False for k in private)
    # The training zone's private subnet (the other serves hosted endpoints only).
    training = [k for k in private if "privateSubnet1" in k]
    data = _by_prefix(s, "TrainStack", "AWS::EC2::LaunchTemplate", "ComputeTemplate")["LaunchTemplateData"]
    assert len(training) == 1 and training[0] in json.dumps(data["NetworkInterfaces"][0]["SubnetId"])
    assert not any(k in json.dumps(s.templates["TrainStack"]) for k in private if k not in training)


def test_user_data_mounts_fsx_and_sets_the_efa_environment(cluster):
    itype, s = cluster
    data = _by_prefix(s, "TrainStack", "AWS::EC2::LaunchTemplate", "ComputeTemplate")["LaunchTemplateData"]
    script = _user_data(data)
    assert script.startswith("MIME-Version: 1.0") and "text/x-shellscript" in script
    assert "mount -t lustre -o relatime,flock" in script and " /fsx" in script
    assert "DNSName" in script and "LustreMountName" in script  # from the DataStack's file system
    assert "export FI_PROVIDER=efa" in script and "export FI_EFA_USE_DEVICE_RDMA=1" in script
    if itype.startswith("p"):  # GPU jobs load the AWS OFI NCCL plugin and refuse a TCP fallback
        assert "NCCL_SOCKET_IFNAME" in script and "NCCL_NET='AWS Libfabric'" in script
        assert "/opt/amazon/ofi-nccl/lib" in script
    else:
        assert "NCCL" not in script and "MALLOC_ARENA_MAX" in script


def test_cluster_placement_group_in_the_template(cluster):
    _, s = cluster
    group = s.one("TrainStack", "AWS::EC2::PlacementGroup")["Properties"]
    assert group["Strategy"] == "cluster"
    data = _by_prefix(s, "TrainStack", "AWS::EC2::LaunchTemplate", "ComputeTemplate")["LaunchTemplateData"]
    assert data["Placement"]["GroupName"] == {"Ref": "PlacementGroup"}


def test_pcs_cluster_compute_group_login_and_queue(cluster):
    itype, s = cluster
    pcs = s.one("TrainStack", "AWS::PCS::Cluster")["Properties"]
    assert pcs["Scheduler"] == {"Type": "SLURM", "Version": SLURM_VERSION} and pcs["Size"] == "SMALL"
    compute = _by_prefix(s, "TrainStack", "AWS::PCS::ComputeNodeGroup", "SlurmCompute")
    assert compute["InstanceConfigs"] == [{"InstanceType": itype}]
    # Dynamic on-demand nodes; static ones on a reservation (trn2 here), which bills whether they run or not.
    static = "training.capacity_reservation_id" in (TYPES[itype] or {})
    assert compute["ScalingConfiguration"] == {"MinInstanceCount": 16 if static else 0, "MaxInstanceCount": 16}
    assert compute["PurchaseOption"] == "ONDEMAND"
    assert "ComputeTemplate" in json.dumps(compute["CustomLaunchTemplate"])
    assert "NodeImage" in json.dumps(compute["AmiId"])
    login = _by_prefix(s, "TrainStack", "AWS::PCS::ComputeNodeGroup", "SlurmLogin")
    assert login["ScalingConfiguration"] == {"MinInstanceCount": 1, "MaxInstanceCount": 1}
    queue = s.one("TrainStack", "AWS::PCS::Queue")["Properties"]
    assert "SlurmCompute" in json.dumps(queue["ComputeNodeGroupConfigurations"])
    outputs = s.templates["TrainStack"]["Outputs"]
    assert {"Connect", "Submit", "PcsClusterId", "NodeImageId"} <= set(outputs)
    example = "train-trainium.sbatch" if itype.startswith("trn") else "train-gpu.sbatch"
    assert example in outputs["Submit"]["Value"] and "--nodes=16" in outputs["Submit"]["Value"]


def test_node_role_is_least_privilege_for_pcs(cluster):
    _, s = cluster
    role = _by_prefix(s, "TrainStack", "AWS::IAM::Role", "TrainingRole")
    assert role["Path"] == "/aws-pcs/"  # PCS accepts AWSPCS* names or this path
    assert "ManagedPolicyArns" not in role
    statements = _by_prefix(s, "TrainStack", "AWS::IAM::Policy", "TrainingRole")["PolicyDocument"]["Statement"]
    register = [st for st in statements if st["Action"] == "pcs:RegisterComputeNodeGroupInstance"]
    assert register and "SlurmCluster" in json.dumps(register[0]["Resource"])
    profile = _by_prefix(s, "TrainStack", "AWS::IAM::InstanceProfile", "SlurmNodeProfile")
    assert profile["Path"] == "/aws-pcs/"


def test_node_image_is_baked_from_the_matching_dlami(cluster, tmp_path):
    itype, s = cluster
    stack = load_software().for_type(CAT.types[itype])
    recipe = s.one("TrainStack", "AWS::ImageBuilder::ImageRecipe")["Properties"]
    # The parent is the deploy-time lookup's answer (never an SSM parameter, which names the vendor's latest), and
    # the lookup asks for exactly software.yaml's DLAMI of exactly the pinned release.
    lookup, attribute = recipe["ParentImage"]["Fn::GetAtt"]
    parent = s.resources("TrainStack", "Custom::ParentImage")[lookup]["Properties"]
    assert attribute == "ImageId" and "ssm:" not in json.dumps(recipe)
    assert parent["Query"] == {"Owners": [stack.parent_dlami_owner],
                               "Filters": [{"Name": "name", "Values": [stack.parent_dlami_name]}]}
    assert parent["Marker"] == (stack.release_marker or "")
    components = s.resources("TrainStack", "AWS::ImageBuilder::Component")
    in_order = [components[c["ComponentArn"]["Fn::GetAtt"][0]]["Properties"]["Data"] for c in recipe["Components"]]
    steps = {step["name"]: step for doc in in_order for step in yaml.safe_load(doc)["phases"][0]["steps"]}
    assert {"InstallPcsAgentAndSlurm", "InstallLustreClient", "InstallFramework", "ShipExamples"} <= set(steps)
    assert all(installs(steps["InstallFramework"]["inputs"]["commands"][0], stack, p) for p in stack.pip)
    assert f"aws-pcs-slurm-{SLURM_VERSION}-installer" in steps["InstallPcsAgentAndSlurm"]["inputs"]["commands"][0]
    # The examples' steps run here as the bake runs them, in order, into a folder in place of the node's: every
    # example arrives byte for byte (a file shipped in parts joined), executable, and the step's check passes. The
    # Submit line runs prepare.sbatch and prepare.py too.
    node = tmp_path / "examples"
    for name in [n for n in steps if n.startswith("ShipExamples")] + ["ExamplesArrived"]:
        script = steps[name]["inputs"]["commands"][0].replace(EXAMPLES_ON_NODE, str(node))
        run = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
        assert run.returncode == 0, (name, run.stderr[-2000:])
    shipped = {p.name: p.read_bytes() for p in node.iterdir()}
    assert shipped == {p.name: p.read_bytes() for p in (ROOT / "examples" / "slurm").iterdir()
                       if p.suffix in (".sbatch", ".py", ".sh")}
    assert all(p.stat().st_mode & 0o777 == 0o755 for p in node.iterdir())
    assert {"train-gpu.sbatch", "train-trainium.sbatch", "train.py", "prepare.sbatch", "prepare.py"} <= set(shipped)
    # Image Builder refuses a component document over 16,000 characters (CloudFormation validation).
    assert len(in_order) == len(components) and all(len(doc) <= 16_000 for doc in in_order)


def test_efa_security_group_rules(cluster):
    _, s = cluster
    groups = s.resources("NetworkStack", "AWS::EC2::SecurityGroup")
    efa_id = next(k for k in groups if k.startswith("SecurityCluster"))
    ingress = [r["Properties"] for r in s.resources("NetworkStack", "AWS::EC2::SecurityGroupIngress").values()]
    egress = [r["Properties"] for r in s.resources("NetworkStack", "AWS::EC2::SecurityGroupEgress").values()]

    def to_self(rule, peer_key):
        return (rule["IpProtocol"] == "-1" and efa_id in json.dumps(rule["GroupId"])
                and efa_id in json.dumps(rule.get(peer_key, "")))
    assert any(to_self(r, "SourceSecurityGroupId") for r in ingress), "EFA needs all-protocol ingress from itself"
    assert any(to_self(r, "DestinationSecurityGroupId") for r in egress), "EFA needs all-protocol egress to itself"
    lustre_id = next(k for k in groups if k.startswith("SecurityLustre"))
    lustre_in = {(r["FromPort"], r["ToPort"]) for r in ingress
                 if lustre_id in json.dumps(r["GroupId"]) and efa_id in json.dumps(r["SourceSecurityGroupId"])}
    assert lustre_in == {(988, 988), (1018, 1023)}
    for g in groups.values():
        assert all(r.get("CidrIp") != "0.0.0.0/0" for r in g["Properties"].get("SecurityGroupIngress", []))
    assert all(r.get("CidrIp") != "0.0.0.0/0" for r in ingress)


def test_fsx_lustre_persistent2_linked_to_the_bucket(cluster):
    _, s = cluster
    fs = s.resources("DataStack", "AWS::FSx::FileSystem")
    assert set(fs) == {"LustreFileSystem4AFDAE78"}
    res = fs["LustreFileSystem4AFDAE78"]
    # A cache of the kept bucket, deleted with DataStack (issue 31: retained, it blocked NetworkStack's deletion).
    assert res["DeletionPolicy"] == "Delete"
    props = res["Properties"]
    lustre = props["LustreConfiguration"]
    assert lustre["DeploymentType"] == "PERSISTENT_2" and lustre["DataCompressionType"] == "LZ4"
    assert lustre["PerUnitStorageThroughput"] in (125, 250, 500, 1000)
    assert props["StorageCapacity"] == 1200 or props["StorageCapacity"] % 2400 == 0
    assert props["KmsKeyId"] == {"Ref": "DataKey2A0DE9E6"}
    assert len(props["SubnetIds"]) == 1
    links = {r["Properties"]["FileSystemPath"]: r for r in
             s.resources("DataStack", "AWS::FSx::DataRepositoryAssociation").values()}
    assert set(links) == {"/datasets", "/checkpoints", "/output"}  # never / (the whole bucket)
    assert all(r["DeletionPolicy"] == "Delete" for r in links.values())  # they go with their file system

    def linked(path: str) -> tuple[str, list, list]:
        props = links[path]["Properties"]
        prefix = props["DataRepositoryPath"]["Fn::Join"][1][-1]
        assert "DatasetsDataset6D2CC711" in json.dumps(props["DataRepositoryPath"])
        return (prefix, props["S3"].get("AutoImportPolicy", {}).get("Events", []),
                props["S3"].get("AutoExportPolicy", {}).get("Events", []))

    # The dataset of record is imported and never exported: nothing done on /fsx deletes or rewrites it.
    assert linked("/datasets") == ("/datasets/", ["NEW", "CHANGED", "DELETED"], [])
    assert linked("/checkpoints") == ("/checkpoints/", ["NEW", "CHANGED", "DELETED"], ["NEW", "CHANGED", "DELETED"])
    # The trained model: /fsx/output/NAME is exported to models/NAME/, where the serving contract reads it.
    assert linked("/output") == ("/models/", [], ["NEW", "CHANGED", "DELETED"])
    # Inference data, job code and lifecycle scripts are out of the file system's reach; models/ only receives what
    # the cluster exports (nothing is imported from it, so a served model never changes what is on /fsx).
    reached = {linked(p)[0] for p in links}
    for prefix in ("/inference/", "/jobs/", "/lifecycle/"):
        assert not any(prefix.startswith(r) or r.startswith(prefix) for r in reached)


def test_stateful_logical_ids_do_not_move_with_the_training_type(synth):
    ids = [set(synth("huge", o).templates["DataStack"]["Resources"]) for o in
           (None, {"training.instance_type": "p5.48xlarge"}, {"training.instance_type": "p4d.24xlarge"},
            {"training.instance_type": "p6-b200.48xlarge"})]
    assert ids[0] == ids[1] == ids[2] == ids[3]
    assert {"LustreFileSystem4AFDAE78", "DatasetsDataset6D2CC711", "DataKey2A0DE9E6", "LustreLinkDatasets543B8A99",
            "LustreLinkCheckpointsD44243DB", "LustreLinkOutputD6D3E02B"} <= ids[0]


def _compute(s) -> tuple[dict, dict]:
    """The compute node group's properties and its launch template's data."""
    return (_by_prefix(s, "TrainStack", "AWS::PCS::ComputeNodeGroup", "SlurmCompute"),
            _by_prefix(s, "TrainStack", "AWS::EC2::LaunchTemplate", "ComputeTemplate")["LaunchTemplateData"])


def test_on_demand_compute_nodes_scale_to_zero_when_idle(synth):
    """Before: MinInstanceCount = MaxInstanceCount, so 16 idle nodes billed around the clock. Now the on-demand group
    is dynamic (PCS API ScalingConfiguration, minimum 0) and the cluster ends idle nodes after
    ScaleDownIdleTimeInSeconds (CloudFormation, AWS::PCS::Cluster SlurmConfiguration)."""
    s = synth("huge")
    group, data = _compute(s)
    t = plan(load("huge")).training
    assert group["ScalingConfiguration"] == {"MinInstanceCount": 0, "MaxInstanceCount": t.instance_count}
    assert group["PurchaseOption"] == "ONDEMAND" and group["InstanceConfigs"] == [{"InstanceType": t.instance_type}]
    assert CAT.types[t.instance_type].sold_on_demand(load("huge").region)
    cluster = s.one("TrainStack", "AWS::PCS::Cluster")["Properties"]
    assert cluster["SlurmConfiguration"]["ScaleDownIdleTimeInSeconds"] == t.scale_down_idle_s == 600
    assert not {"InstanceMarketOptions", "CapacityReservationSpecification", "InstanceType"} & set(data)
    login = _by_prefix(s, "TrainStack", "AWS::PCS::ComputeNodeGroup", "SlurmLogin")
    assert login["ScalingConfiguration"] == {"MinInstanceCount": 1, "MaxInstanceCount": 1}  # where users log in


def test_capacity_block_template(synth):
    """PCS user guide, "Configure an AWS PCS compute node group to use a Capacity Block": the launch template's
    InstanceMarketOptions MarketType capacity-block, a CapacityReservationSpecification with the block's ID and the
    block's InstanceType; the group's purchaseOption CAPACITY_BLOCK and a maxInstanceCount within the block. The
    block is paid whether its nodes run or not: static nodes. No placement group (AWS places a block)."""
    s = synth("huge", CAPACITY_BLOCK)
    group, data = _compute(s)
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": RESERVATION["training.capacity_reservation_id"]}}
    assert data["InstanceType"] == CAPACITY_BLOCK["training.instance_type"] and "Placement" not in data
    assert not s.resources("TrainStack", "AWS::EC2::PlacementGroup")
    assert group["PurchaseOption"] == "CAPACITY_BLOCK"
    assert group["ScalingConfiguration"] == {"MinInstanceCount": 16, "MaxInstanceCount": 16}
    assert group["InstanceConfigs"] == [{"InstanceType": data["InstanceType"]}]


def test_on_demand_reservation_template(synth):
    """An On-Demand Capacity Reservation (PCS user guide, "Using ODCRs with AWS PCS"): the launch template targets it,
    the group keeps the on-demand purchase option, and its nodes are static, since the reservation bills anyway.
    Trn2, which EC2 sells in us-east-2 only as blocks PCS does not run, builds this way."""
    s = synth("huge", TRN2)
    group, data = _compute(s)
    assert data["CapacityReservationSpecification"]["CapacityReservationTarget"]["CapacityReservationId"] == \
        RESERVATION["training.capacity_reservation_id"]
    assert "InstanceMarketOptions" not in data and "Placement" in data
    assert group["PurchaseOption"] == "ONDEMAND"
    assert group["InstanceConfigs"] == [{"InstanceType": "trn2.48xlarge"}]
    assert group["ScalingConfiguration"] == {"MinInstanceCount": 16, "MaxInstanceCount": 16}


def _launched_tags(template: dict) -> dict[str, dict[str, str]]:
    """Each launch template's tags by what EC2 launches from it: {template id: {resource type: {key: value}}}."""
    return {lid: {spec["ResourceType"]: {t["Key"]: t["Value"] for t in spec["Tags"]}
                  for spec in r["Properties"]["LaunchTemplateData"].get("TagSpecifications", [])}
            for lid, r in template["Resources"].items() if r["Type"] == "AWS::EC2::LaunchTemplate"}


def test_instances_volumes_and_interfaces_carry_the_workload_tag(variant_synth):
    """Before: instances were launched with Name only, so nothing they billed carried a cost tag. Every launch
    template of every variant tags the instance, its volumes and its network interfaces with the stack's tags."""
    name, s = variant_synth
    preset, overrides = VARIANTS[name]
    templates = _launched_tags(s.templates["TrainStack"])
    if load(preset, overrides).training.orchestrator == "slurm":
        assert set(templates) == {lid for lid in templates if lid.startswith(("ComputeTemplate", "LoginTemplate"))}
        assert len(templates) == 2
    for lid, by_kind in templates.items():
        assert set(by_kind) == {"instance", "volume", "network-interface"}, lid
        for tags in by_kind.values():
            assert tags["workload"] == load(preset, overrides).name and tags["Name"].endswith(("-compute", "-login"))


def test_a_teams_nodes_carry_its_cost_tags(teams_synth):
    """A team's budget filters on `team`: its nodes, their volumes and interfaces carry it (with cost-center, stage
    and workload), as every taggable resource of the team's stacks does."""
    for team, stacks in teams_synth.templates.items():
        tagged = _launched_tags(stacks["TrainStack"])
        stack_tags = {t["Key"]: t["Value"] for r in stacks["TrainStack"]["Resources"].values()
                      if r["Type"] == "AWS::IAM::Role" for t in r["Properties"].get("Tags", [])}
        for by_kind in tagged.values():
            for tags in by_kind.values():
                assert tags["team"] == team and {k: tags[k] for k in ("team", "cost-center", "stage", "workload")} \
                    == {k: stack_tags[k] for k in ("team", "cost-center", "stage", "workload")}


def test_sagemaker_jobs_plan_records_the_s3_input_mode(synth):
    s = synth("intermediate")
    assert s.templates["TrainStack"]["Outputs"]["InputMode"]["Value"] == "FastFile"
    assert not s.resources("TrainStack", "AWS::PCS::Cluster") and not s.resources("DataStack", "AWS::FSx::FileSystem")


def test_shared_home_on_efs(synth):
    s = synth("huge", {"data.shared_home": "true"})
    efs = s.one("DataStack", "AWS::EFS::FileSystem")
    # Kept, except when its first deploy fails (issue 31: RetainExceptOnCreate).
    assert efs["DeletionPolicy"] == "RetainExceptOnCreate" and efs["Properties"]["Encrypted"] is True
    data = _by_prefix(s, "TrainStack", "AWS::EC2::LaunchTemplate", "ComputeTemplate")["LaunchTemplateData"]
    script = _user_data(data)
    assert ".efs.us-east-2.amazonaws.com:/ /home nfs4 nfsvers=4.1" in script and "SharedHome" in script


def test_examples_are_valid_scripts():
    import subprocess

    from .conftest import ROOT
    for script in ("train-gpu.sbatch", "train-trainium.sbatch"):
        assert subprocess.run(["bash", "-n", str(ROOT / "examples" / "slurm" / script)]).returncode == 0
    path = ROOT / "examples" / "slurm" / "train.py"
    compile(path.read_text(), str(path), "exec")
