"""The PCS node image bake (constructs_lib/node_image.py): where its logs go and who may write them, the nodes' root
volumes (Neuron asks for 512 GB on Trn1/Trn2/Trn3), and parents that match the pinned release."""

from __future__ import annotations

import subprocess

import pytest

from constructs_lib.node_image import BAKE_LOG_PREFIX, bake_steps, framework_script
from workloads import load, plan
from workloads.catalog import load_catalog, load_software

from .conftest import TRN2, VARIANTS
from .test_runtime_contract import world_of
from .contract_policy import Call, evaluate

BUILD_ROLE = "TrainStack/NodeImage/BuildRole/Resource"
LOGS_BUCKET = "DataStack/Datasets/AccessLogs/Resource"


def test_a_failed_bake_leaves_its_logs_in_the_logs_bucket(synth):
    """The infrastructure configuration names an S3 location; the build instance may write there and nowhere else."""
    s = synth("huge")
    world = world_of(s)
    stack, logical = world.find("TrainStack/NodeImage/Infrastructure", "AWS::ImageBuilder::InfrastructureConfiguration")
    logs = world.resolve(stack.name, stack.template["Resources"][logical]["Properties"]["Logging"]["S3Logs"])
    bucket = world.arn(LOGS_BUCKET, "AWS::S3::Bucket")
    assert logs == {"S3BucketName": bucket.split(":::")[1], "S3KeyPrefix": BAKE_LOG_PREFIX.rstrip("/")}
    role = world.role(BUILD_ROLE)
    log = f"{bucket}/{BAKE_LOG_PREFIX}node-neuron/1.0.0/1/TOE_2026-11-23/application.log"
    # The logs bucket is SSE-S3 (the server access log destination; issue 31): the upload needs no key.
    decision = evaluate(role, Call("s3:PutObject", log, "S3Logs"), world)
    assert decision.allowed, decision.reason
    dataset = world.arn("DataStack/Datasets/Dataset/Resource", "AWS::S3::Bucket")
    for elsewhere in (f"{bucket}/dataset/2026-11-23-access-log", f"{dataset}/datasets/x", f"{dataset}/{BAKE_LOG_PREFIX}x"):
        assert not evaluate(role, Call("s3:PutObject", elsewhere, "nowhere else"), world).allowed, elsewhere
    # The bake starts only once its role may upload the logs.
    image = next(r for r in stack.template["Resources"].values() if r["Type"] == "AWS::ImageBuilder::Image")
    policies = [lid for lid, r in stack.template["Resources"].items()
                if r["Type"] == "AWS::IAM::Policy" and lid.startswith("NodeImageBuildRoleDefaultPolicy")]
    assert policies and set(policies) <= set(image.get("DependsOn", []))


# ------------------------------------------------------------------ root volumes (Neuron: 512 GB on Trn1/Trn2/Trn3)

def test_every_trainium_type_gets_the_root_volume_neuron_asks_for():
    facts, catalog = load_software(), load_catalog()
    trainium = [t for t in catalog.types.values() if t.accelerator and t.accelerator.kind == "trainium"]
    assert trainium and facts.root_volume_minimum_gib["trainium"] >= 512  # the Neuron setup guide's minimum
    for itype in trainium:
        assert facts.root_volume_gib(itype) >= facts.root_volume_minimum_gib["trainium"], itype.name
    for itype in catalog.types.values():  # nothing gets less than the default
        assert facts.root_volume_gib(itype) >= facts.root_volume_default_gib


@pytest.mark.parametrize("variant", ["huge", "huge-p5"])
def test_node_image_and_launch_templates_carry_the_types_root_volume(synth, variant):
    """The image's snapshot and both launch templates (compute, login: same image) are the type's size."""
    name, overrides = VARIANTS[variant]
    p = plan(load(name, overrides))
    want = load_software().root_volume_gib(load_catalog().get(p.training.instance_type))
    s = synth(name, overrides)
    recipe = s.one("TrainStack", "AWS::ImageBuilder::ImageRecipe")["Properties"]
    assert [m["Ebs"]["VolumeSize"] for m in recipe["BlockDeviceMappings"]] == [want]
    templates = s.resources("TrainStack", "AWS::EC2::LaunchTemplate").values()
    sizes = [m["Ebs"]["VolumeSize"] for t in templates for m in t["Properties"]["LaunchTemplateData"]["BlockDeviceMappings"]]
    assert sizes == [want, want]
    if p.training.accelerator_kind == "trainium":
        assert want >= 512


def test_hyperpod_workers_get_the_disk_their_vendor_asks_for(synth):
    """HyperPod sizes its root volume itself; a type with a vendor minimum gets a secondary volume of that size."""
    name, overrides = VARIANTS["huge-hyperpod"]
    p = plan(load(name, overrides))
    facts = load_software()
    cluster = synth(name, overrides).one("TrainStack", "AWS::SageMaker::Cluster")["Properties"]
    workers = next(g for g in cluster["InstanceGroups"] if g["InstanceGroupName"] == "workers")
    ebs = [c["EbsVolumeConfig"] for c in workers.get("InstanceStorageConfigs", []) if "EbsVolumeConfig" in c]
    disk = facts.root_volume_gib(load_catalog().get(p.training.instance_type))
    assert ebs == ([{"VolumeSizeInGB": disk}] if disk > facts.root_volume_default_gib else [])


# ------------------------------------------------------------------ parents pinned to the pins' release

def _next(release: str) -> str:
    major, minor, *_ = release.split(".")
    return f"{major}.{int(minor) + 1}.0"


@pytest.mark.parametrize("stack", [s for s in load_software().stacks if s.neuron_release], ids=lambda s: s.name)
def test_the_neuron_bake_refuses_a_parent_of_another_release(stack, tmp_path):
    """The first step reads the parent AMI's description (where Neuron names a DLAMI's release) and fails unless it
    is the release of the pins (a release line such as 2.28: any of its patch releases); run here with `curl` and
    `aws` stubbed on PATH. Both Neuron stacks: TorchNeuron on Trn2, the legacy XLA path on Trn1."""
    assert f"Neuron {stack.neuron_release}" in stack.name
    line = stack.neuron_release.count(".") == 1
    releases = [(stack.neuron_release + (".0" if line else ""), True), ("2.99.0", False),
                (_next(stack.neuron_release), False)] + ([(stack.neuron_release + ".1", True),
                                                          (stack.neuron_release + "0.0", False)] if line else [])
    first = bake_steps(software=stack, region="us-east-2")[0]
    assert first.name == "CheckParentRelease" and first.check
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "curl").write_text("#!/bin/bash\necho ami-0123456789abcdef0\n")
    for release, ok in releases:
        (stubs / "aws").write_text("#!/bin/bash\necho 'Deep Learning Base Neuron AMI (Ubuntu 24.04) Supported EC2 "
                                   f"instances: Trn2, Trn3. Neuron SDK {release}. Release notes: ...'\n")
        for stub in stubs.iterdir():
            stub.chmod(0o755)
        run = subprocess.run(["bash", "-c", first.commands()], capture_output=True, text=True,
                             env={"PATH": f"{stubs}:/usr/bin:/bin"})
        assert (run.returncode == 0) == ok, (release, run.stderr)
        if not ok:
            assert "update the pins and neuron_release" in run.stderr


def test_the_build_role_may_read_its_parents_description(synth):
    world = world_of(synth("huge", TRN2))  # the Neuron bake checks its parent's release
    role = world.role(BUILD_ROLE)
    assert evaluate(role, Call("ec2:DescribeImages", "*", "CheckParentRelease"), world).allowed


def test_hyperpods_driver_runs_the_cuda_stack_it_installs():
    """HyperPod's Slurm AMI brings NVIDIA driver 580.126.09 (SageMaker HyperPod AMI releases for Slurm); the lifecycle
    installs the GPU stack on it, so the wheel's CUDA must be one that driver branch runs (R580: CUDA 13.x by minor
    version compatibility). A driver of an older branch would not."""
    facts = load_software()
    driver = facts.drivers["hyperpod-slurm"]
    for stack in (s for s in facts.stacks if s.device == "cuda"):
        assert stack.cuda and facts.cuda_runs_on(stack.cuda, driver=driver), (stack.name, driver)
        assert not facts.cuda_runs_on(stack.cuda, driver="570.172.08")  # the rule can say no
        assert "CheckTorchSeesTheGpus" in framework_script(stack)  # and the node proves it at creation


def test_the_image_collects_enhanced_metadata_only_if_its_role_may_put_inventory(synth):
    """Outside review R5 M4: enhanced image metadata is on unless the image says otherwise (botocore's imagebuilder
    CreateImage: enhancedImageMetadataEnabled, "Enabled by default"), and it is gathered through SSM Inventory: an
    image that collects it needs a build role that may call ssm:PutInventory."""
    world = world_of(synth("huge"))
    stack, logical = world.find("TrainStack/NodeImage/Image", "AWS::ImageBuilder::Image")
    collects = stack.template["Resources"][logical]["Properties"].get("EnhancedImageMetadataEnabled", True)
    role = world.role(BUILD_ROLE)
    instance = f"arn:aws:ec2:{stack.region}:{stack.account}:instance/i-0123456789abcdef0"
    may_put = evaluate(role, Call("ssm:PutInventory", instance, "SSM Inventory"), world).allowed
    assert may_put or not collects
