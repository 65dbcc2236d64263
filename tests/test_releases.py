"""Releases resolved at deploy time (issue 31): the node image's parent is the pinned release's DLAMI, found by
ec2:DescribeImages when the stack deploys, never an SSM `latest` parameter; the Slurm installer is pinned and
gpg-verified like the PCS agent; the baked AMI goes with the stack.

The lookup is workloads/commands/dlami.py, run three ways here: against moto's DescribeImages in process (the rule preflight
and the Lambda share), as the Lambda replying to CloudFormation, and in the emulator that `make demo` deploys to.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from http.server import HTTPServer

import pytest

from constructs_lib.node_image import SLURM_INSTALLER_VERSION, SLURM_VERSION, bake_steps
from workloads.commands import dlami
from workloads.catalog import load_software

from .conftest import VARIANTS
from .test_artifact_check import _Replies
from .test_preflight import images
from .test_runtime_contract import world_of

STACKS = load_software().stacks
NEURON = next(s for s in STACKS if s.neuron_release == "2.33.0")
SLURM_VARIANTS = [v for v in VARIANTS if v.startswith("huge") and "hyperpod" not in v and "sagemaker" not in v]


# ---------------------------------------------------------------- the templates: no `latest`, the query is the pin's

@pytest.mark.parametrize("variant", SLURM_VARIANTS)
def test_the_node_image_parent_is_looked_up_for_the_pinned_release_never_latest(synth, variant):
    """Failed on the code before: ParentImage was ssm:/aws/service/.../latest/image_id, which names the vendor's next
    release the day it ships. Now it is the lookup's ImageId, and the lookup's query is software.yaml's, to the
    letter, for the stack the plan trains on."""
    name, overrides = VARIANTS[variant]
    s = synth(name, overrides)
    recipe = s.one("TrainStack", "AWS::ImageBuilder::ImageRecipe")["Properties"]
    assert "latest" not in json.dumps(recipe["ParentImage"]) and "ssm:" not in json.dumps(recipe["ParentImage"])
    (lookup_id, lookup), = s.resources("TrainStack", dlami.RESOURCE_TYPE).items()
    assert recipe["ParentImage"] == {"Fn::GetAtt": [lookup_id, "ImageId"]}
    props = lookup["Properties"]
    stack = next(st for st in STACKS if st.name == props["Stack"])
    assert props["Query"] == {"Owners": [stack.parent_dlami_owner],
                              "Filters": [{"Name": "name", "Values": [stack.parent_dlami_name]}]}
    assert props["Marker"] == (stack.release_marker or "")
    # The Lambda runs the very rule this file tests, and its role may make the call and nothing else.
    function = next(r for lid, r in s.resources("TrainStack", "AWS::Lambda::Function").items()
                    if lid.startswith("NodeImageParentHandler"))
    assert function["Properties"]["Code"]["ZipFile"] == open(dlami.__file__).read()
    world = world_of(s)
    from .contract_policy import Call, evaluate

    role = world.role("TrainStack/NodeImage/Parent/Role/Resource")
    assert evaluate(role, Call("ec2:DescribeImages", "*", "the lookup"), world).allowed
    assert not evaluate(role, Call("ec2:RunInstances", "*", "nothing else"), world).allowed


def test_every_software_stack_names_its_parent_dlami():
    """No stack is left on an SSM parameter: each has the owner and name its parent is looked up by."""
    for stack in STACKS:
        assert stack.parent_dlami_owner == "amazon" and stack.parent_dlami_name.endswith("*"), stack.name
        assert (stack.release_marker is not None) == bool(stack.neuron_release), stack.name


# ---------------------------------------------------------------- the rule: newest of the release, or one line why

@pytest.fixture
def dlamis(monkeypatch):
    """moto in process with the recorded Neuron DLAMIs (tests/fixtures/preflight), as preflight's tests have them."""
    from .test_preflight import moto  # noqa: F401 - the same emulated account

    def load(name: str):
        images(monkeypatch, name)
        from moto import mock_aws

        mock = mock_aws()
        mock.start()
        import boto3

        return mock, boto3.client("ec2", region_name="us-east-2", aws_access_key_id="testing",
                                  aws_secret_access_key="testing")
    started = []
    yield lambda name: started.append(load(name)) or started[-1][1]
    for mock, _ in started:
        mock.stop()


def test_the_newest_image_of_the_pinned_release_wins(dlamis):
    ec2 = dlamis("neuron-dlamis-pinned")  # 2.33.0 (20261118), 2.34.0 (newer), 2.28.1
    image, reason = dlami.resolve(ec2, NEURON.parent_dlami_query(), NEURON.release_marker, "us-east-2")
    assert reason is None and image["ImageId"] == "ami-0b33a1c2d3e4f5a60"  # not the newer 2.34.0 one
    older = {"ImageId": "ami-old", "CreationDate": "2026-11-01T00:00:00.000Z", "Description": "Neuron SDK 2.33.0."}
    newer = {"ImageId": "ami-new", "CreationDate": "2026-11-20T00:00:00.000Z", "Description": "Neuron SDK 2.33.0."}
    assert dlami.newest_parent([older, newer], "Neuron SDK 2.33.0")["ImageId"] == "ami-new"
    assert dlami.newest_parent([older], "Neuron SDK 2.34.0") is None


def test_no_image_of_the_release_names_the_release_and_the_query(dlamis):
    ec2 = dlamis("neuron-dlamis-moved-on")  # the region lists 2.34.0 and 2.35.0 only
    image, reason = dlami.resolve(ec2, NEURON.parent_dlami_query(), NEURON.release_marker, "us-east-2")
    assert image is None
    assert reason.startswith("no Deep Learning Base Neuron AMI (Ubuntu 24.04)* image of Neuron SDK 2.33.0 owned by "
                             "amazon in us-east-2; the region has Deep Learning Base Neuron AMI (Ubuntu 24.04)* images "
                             "of Neuron 2.34.0, 2.35.0")
    assert json.dumps(NEURON.parent_dlami_query(), sort_keys=True) in reason and "\n" not in reason


class _Ec2:
    def __init__(self, images):
        self.images, self.asked = images, []
        self.meta = type("Meta", (), {"region_name": "us-east-2"})()

    def describe_images(self, **query):
        self.asked.append(query)
        return {"Images": self.images}


def _reply_to(request: str, ec2, monkeypatch) -> dict:
    """The Lambda's handler, its EC2 client stubbed, replying to a local ResponseURL as CloudFormation's."""
    import boto3

    monkeypatch.setattr(boto3, "client", lambda *a, **k: ec2)
    server = HTTPServer(("localhost", 0), _Replies)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Replies.got = []
    try:
        dlami.handler({"RequestType": request, "ResponseURL": f"http://localhost:{server.server_port}/r",
                       "StackId": "stack", "RequestId": "r1", "LogicalResourceId": "NodeImageParent",
                       "ResourceType": dlami.RESOURCE_TYPE,
                       "ResourceProperties": {"Query": NEURON.parent_dlami_query(), "Marker": NEURON.release_marker,
                                              "Stack": NEURON.name}}, None)
    finally:
        server.shutdown()
    (reply,) = _Replies.got
    return reply


def test_the_lambda_answers_the_image_or_fails_with_the_reason(monkeypatch):
    pinned = {"ImageId": "ami-0pinned", "Name": "Deep Learning Base Neuron AMI (Ubuntu 24.04) 20261118",
              "CreationDate": "2026-11-18T10:00:00.000Z", "Description": "Neuron SDK 2.33.0."}
    ec2 = _Ec2([pinned])
    ok = _reply_to("Create", ec2, monkeypatch)
    assert ok["Status"] == "SUCCESS" and ok["Data"]["ImageId"] == "ami-0pinned" == ok["PhysicalResourceId"]
    assert ec2.asked == [NEURON.parent_dlami_query()]  # exactly software.yaml's query
    failed = _reply_to("Create", _Ec2([{**pinned, "Description": "Neuron SDK 2.34.0."}]), monkeypatch)
    assert failed["Status"] == "FAILED" and "Neuron SDK 2.33.0" in failed["Reason"]
    assert "the region has Deep Learning Base Neuron AMI (Ubuntu 24.04)* images of Neuron 2.34.0" in failed["Reason"]
    quiet = _Ec2([])
    assert _reply_to("Delete", quiet, monkeypatch)["Status"] == "SUCCESS" and quiet.asked == []  # deletes nothing


def test_the_emulator_serves_a_placeholder_for_each_pinned_dlami_and_refuses_another_release():
    """What `make demo` deploys against: moto's public image list has no DLAMIs, so the emulator lists a placeholder
    per pinned parent, described as one; a release it does not list fails as on AWS."""
    from tools.emulator import PLACEHOLDER_DLAMI, running

    with running("us-east-2") as emu:
        ec2 = emu.client("ec2")
        for stack in STACKS:
            image, reason = dlami.resolve(ec2, stack.parent_dlami_query(), stack.release_marker, "us-east-2")
            assert reason is None and PLACEHOLDER_DLAMI in image["Description"], stack.name
        _, reason = dlami.resolve(ec2, NEURON.parent_dlami_query(), "Neuron SDK 2.99.0", "us-east-2")
        assert reason and reason.startswith("no Deep Learning Base Neuron AMI (Ubuntu 24.04)* image of Neuron SDK "
                                            "2.99.0 owned by amazon in us-east-2; the region has")


# ---------------------------------------------------------------- the Slurm installer: pinned, verified, then run

def _urls(step) -> list[str]:
    return re.findall(r'curl -fsSL "([^"]+)"', step.commands())


def test_every_download_of_the_pcs_software_is_a_pinned_version():
    """Failed on the code before: aws-pcs-slurm-25.11-installer-latest.tar.gz. Each tarball is versioned and
    downloaded with its detached signature."""
    step = next(s for s in bake_steps(software=NEURON, region="us-east-2") if s.name == "InstallPcsAgentAndSlurm")
    urls = _urls(step)
    assert not [u for u in urls if "latest" in u]
    slurm = f"aws-pcs-slurm/aws-pcs-slurm-{SLURM_VERSION}-installer-{SLURM_INSTALLER_VERSION}.tar.gz"
    assert [u for u in urls if u.endswith(slurm)] and [u for u in urls if u.endswith(slurm + ".sig")]
    assert [u for u in urls if re.search(r"aws-pcs-agent-v[\d.]+-\d+\.tar\.gz\.sig$", u)]


def _stubbed(tmp_path, *, bad: str = "") -> dict:
    """curl writes each file; gpg accepts the PCS key's fingerprint and every signature but `bad`'s; tar makes the
    installer directory, whose installer.sh records that it ran."""
    bin_, work = tmp_path / "bin", tmp_path / "work"
    bin_.mkdir(parents=True), work.mkdir()
    ran = tmp_path / "ran"
    (bin_ / "curl").write_text('#!/bin/bash\nwhile [[ $# -gt 0 ]]; do [[ $1 == -o ]] && { echo x > "$2"; shift; }; '
                               'shift; done\n')
    (bin_ / "gpg").write_text(
        "#!/bin/bash\n"
        'if [[ " $* " == *" --fingerprint "* ]]; then echo "fpr:::::::::1C2432C1862F64D1F90A239A7EEF030EDDF5C21C:"; '
        "exit 0; fi\n"
        f'if [[ " $* " == *" --verify "* && -n "{bad}" && " $* " == *"{bad}.sig"* ]]; then exit 1; fi\nexit 0\n')
    (bin_ / "tar").write_text(
        '#!/bin/bash\nd=$(echo "$2" | sed -E "s/-v?[0-9.]+-[0-9]+\\.tar\\.gz$//")\nmkdir -p "$d"\n'
        f"printf '#!/bin/bash\\necho %s >> %s\\n' \"$d\" {ran} > \"$d/installer.sh\" && chmod +x \"$d/installer.sh\"\n")
    (bin_ / "mktemp").write_text(f"#!/bin/bash\necho {tmp_path}/gnupg\n")
    (bin_ / "ldconfig").write_text("#!/bin/bash\n")
    for stub in bin_.iterdir():
        stub.chmod(0o755)
    step = next(s for s in bake_steps(software=NEURON, region="us-east-2") if s.name == "InstallPcsAgentAndSlurm")
    script = step.commands().replace("cd /tmp", f"cd {work}").replace("/etc/", f"{tmp_path}/etc/")
    (tmp_path / "etc" / "ld.so.conf.d").mkdir(parents=True)
    (tmp_path / "etc" / "profile.d").mkdir()
    script = script.split("# check:")[0]  # the step's work; its check needs a real node
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env={"PATH": f"{bin_}:/usr/bin:/bin"})
    return {"rc": run.returncode, "stderr": run.stderr, "ran": ran.read_text().split() if ran.exists() else []}


def test_the_slurm_installer_runs_only_with_a_good_signature(tmp_path):
    """The step run with curl, gpg and tar stubbed on PATH: both installers run when both signatures hold; a bad
    Slurm signature stops the step before anything is unpacked or run."""
    slurm = f"aws-pcs-slurm-{SLURM_VERSION}-installer-{SLURM_INSTALLER_VERSION}.tar.gz"
    good = _stubbed(tmp_path / "good")
    assert good["rc"] == 0, good["stderr"]
    assert good["ran"] == ["aws-pcs-agent", f"aws-pcs-slurm-{SLURM_VERSION}-installer"]
    forged = _stubbed(tmp_path / "forged", bad=slurm)
    assert forged["rc"] != 0 and forged["ran"] == []
    assert f"{slurm}: bad signature, not installing" in forged["stderr"]


def test_the_bake_checks_the_installed_slurm_is_the_pinned_one():
    step = next(s for s in bake_steps(software=NEURON, region="us-east-2") if s.name == "InstallPcsAgentAndSlurm")
    version, release = SLURM_INSTALLER_VERSION.rsplit("-", 1)
    assert f"SLURM_VERSION='{version}'" in step.check and f"PCS_SLURM_RELEASE='{release}'" in step.check


# ---------------------------------------------------------------- the baked AMI goes with the stack

@pytest.mark.parametrize("variant", ["huge", "huge-trn1"])
def test_the_baked_ami_is_deleted_with_the_image(synth, variant):
    """Image Builder deletes the AMI and its snapshots when the image is deleted or replaced (DeletionSettings), as a
    role Image Builder may assume with the managed policy for it; the image itself is not retained."""
    name, overrides = VARIANTS[variant]
    s = synth(name, overrides)
    (image,) = s.resources("TrainStack", "AWS::ImageBuilder::Image").values()
    assert image.get("DeletionPolicy", "Delete") == "Delete"
    role_id = image["Properties"]["DeletionSettings"]["ExecutionRole"]["Fn::GetAtt"][0]
    role = s.resources("TrainStack", "AWS::IAM::Role")[role_id]["Properties"]
    assert [st["Principal"] for st in role["AssumeRolePolicyDocument"]["Statement"]] == [
        {"Service": "imagebuilder.amazonaws.com"}]
    assert "service-role/EC2ImageBuilderLifecycleExecutionPolicy" in json.dumps(role["ManagedPolicyArns"])
