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
from .signing import curl_on_path, make_keys, short_tmpdir, stop_agents
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


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    made = make_keys(tmp_path_factory.mktemp("keys"))
    yield made
    stop_agents(made)


def _run_pcs_step(tmp_path, keys, monkeypatch, *, key_file: tuple[str, ...] = ("pinned",),
                  signers: tuple[str, str] = ("pinned", "pinned")) -> dict:
    """The step's own shell with real gpg and gpgv, the PCS fingerprint pinned to the test's `pinned` key: curl serves
    a key file holding `key_file`'s keys and the two tarballs signed by `signers` (agent, Slurm); the tarballs hold
    installer.sh scripts that record that they ran."""
    import constructs_lib.node_image as node_image

    monkeypatch.setattr(node_image, "PCS_KEY_FINGERPRINT", keys.fingerprint("pinned"))
    monkeypatch.setattr(node_image, "PCS_KEYRING", str(tmp_path / "pcs-pinned.gpg"))
    bin_, work, serve = tmp_path / "bin", tmp_path / "work", tmp_path / "serve"
    work.mkdir(parents=True), serve.mkdir()
    curl_on_path(bin_)
    ran = tmp_path / "ran"
    keys.key_file(serve / "aws-pcs-public-key.pub", *key_file)
    agent = f"aws-pcs-agent-v{node_image.PCS_AGENT_VERSION}.tar.gz"
    slurm = f"aws-pcs-slurm-{SLURM_VERSION}-installer-{SLURM_INSTALLER_VERSION}.tar.gz"
    for tarball, folder, signer in ((agent, "aws-pcs-agent", signers[0]),
                                    (slurm, f"aws-pcs-slurm-{SLURM_VERSION}-installer", signers[1])):
        (tmp_path / "src" / folder).mkdir(parents=True)
        (tmp_path / "src" / folder / "installer.sh").write_text(f"#!/bin/bash\necho {folder} >> {ran}\n")
        (tmp_path / "src" / folder / "installer.sh").chmod(0o755)
        subprocess.run(["tar", "czf", str(serve / tarball), "-C", str(tmp_path / "src"), folder], check=True)
        keys.sign(signer, serve / tarball)
    (bin_ / "ldconfig").write_text("#!/bin/bash\n")
    (bin_ / "ldconfig").chmod(0o755)
    step = next(s for s in node_image.bake_steps(software=NEURON, region="us-east-2")
                if s.name == "InstallPcsAgentAndSlurm")
    script = step.commands().replace("cd /tmp", f"cd {work}").replace("/etc/", f"{tmp_path}/etc/")
    (tmp_path / "etc" / "ld.so.conf.d").mkdir(parents=True)
    (tmp_path / "etc" / "profile.d").mkdir()
    script = script.split("# check:")[0]  # the step's work; its check needs a real node
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                         env={"PATH": f"{bin_}:/usr/bin:/bin", "SERVE": str(serve), "TMPDIR": short_tmpdir()})
    return {"rc": run.returncode, "stderr": run.stderr, "ran": ran.read_text().split() if ran.exists() else []}


def test_the_installers_run_when_the_pinned_key_signed_them(tmp_path, keys, monkeypatch):
    good = _run_pcs_step(tmp_path, keys, monkeypatch)
    assert good["rc"] == 0, good["stderr"]
    assert good["ran"] == ["aws-pcs-agent", f"aws-pcs-slurm-{SLURM_VERSION}-installer"]


@pytest.mark.parametrize("key_file, signers, why", [
    # the key file carries the pinned key AND another, and the other signed the Slurm installer: `gpg --verify`
    # against the imported file says "Good signature"; the bake must not
    (("pinned", "extra"), ("pinned", "extra"), "not signed by the pinned key"),
    (("extra", "pinned"), ("extra", "extra"), "not signed by the pinned key"),
    # the URL serves another key altogether
    (("extra",), ("extra", "extra"), "the key file holds no key"),
    # a keyblock carrying the pinned key as a SUBKEY: `gpg --export PIN` exports it whole, and its own primary key
    # signed both tarballs (gpgv alone says "Good signature"), with or without the real key beside it
    (("impostor",), ("impostor", "impostor"), "whose primary key is another's"),
    (("pinned", "impostor"), ("pinned", "impostor"), "whose primary key is another's"),
])
def test_the_bake_refuses_a_signature_by_any_other_key(tmp_path, keys, monkeypatch, key_file, signers, why):
    forged = _run_pcs_step(tmp_path, keys, monkeypatch, key_file=key_file, signers=signers)
    assert forged["rc"] != 0 and forged["ran"] == [], forged
    assert why in forged["stderr"]


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


def _run_lustre_step(tmp_path, keys, *, fingerprint, key_file=("pinned",)) -> subprocess.CompletedProcess:
    """The Lustre step's shell on a parent without a Lustre client (modinfo fails), apt-get recording its calls."""
    from constructs_lib.node_image import LUSTRE_KEYRING, lustre_script

    bin_, serve = tmp_path / "bin", tmp_path / "serve"
    serve.mkdir(parents=True)
    curl_on_path(bin_)
    for name, body in {"modinfo": "exit 1", "lsb_release": "echo noble",
                       "apt-get": f'echo "$*" >> {tmp_path}/apt.log'}.items():
        (bin_ / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_ / name).chmod(0o755)
    keys.key_file(serve / "fsx-ubuntu-public-key.asc", *key_file)
    script = lustre_script(fingerprint).replace(LUSTRE_KEYRING, str(tmp_path / "fsx.gpg")).replace(
        "/etc/apt/sources.list.d/", f"{tmp_path}/")
    return subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{bin_}:/usr/bin:/bin", "SERVE": str(serve), "TMPDIR": short_tmpdir()})


def test_the_lustre_repository_is_trusted_for_the_pinned_key_alone(tmp_path, keys):
    """apt's signed-by keyring gets the pinned fingerprint's key and nothing else the URL served; a URL serving
    another key stops the bake before apt is pointed at the repository."""
    fpr = keys.fingerprint("pinned")
    good = _run_lustre_step(tmp_path / "good", keys, fingerprint=fpr, key_file=("extra", "pinned"))
    assert good.returncode == 0, good.stderr
    listed = subprocess.run(["gpg", "--homedir", str(tmp_path), "--batch", "--with-colons", "--show-keys",
                             str(tmp_path / "good" / "fsx.gpg")], capture_output=True, text=True).stdout
    assert [line.split(":")[9] for line in listed.splitlines() if line.startswith("fpr:")][:1] == [fpr]
    assert keys.fingerprint("extra") not in listed
    bad = _run_lustre_step(tmp_path / "bad", keys, fingerprint=fpr, key_file=("extra",))
    assert bad.returncode != 0 and "the key file holds no key" in bad.stderr
    assert not (tmp_path / "bad" / "apt.log").exists()
    # apt's gpgv would accept the impostor's primary key from a keyring holding its keyblock
    forged = _run_lustre_step(tmp_path / "forged", keys, fingerprint=fpr, key_file=("impostor",))
    assert forged.returncode != 0 and "whose primary key is another's" in forged.stderr
    assert not (tmp_path / "forged" / "apt.log").exists()


def test_without_a_pinned_lustre_fingerprint_the_bake_adds_no_repository(tmp_path, keys):
    run = _run_lustre_step(tmp_path, keys, fingerprint=None)
    assert run.returncode != 0 and "no pinned fingerprint" in run.stderr
    assert not (tmp_path / "apt.log").exists() and not (tmp_path / "fsxlustreclientrepo.list").exists()


@pytest.mark.parametrize("signer, passes", [("pinned", True), ("impostor", False)])
def test_a_signature_counts_only_when_the_signers_primary_key_is_the_pinned_one(tmp_path, keys, signer, passes):
    """`verified` on its own (no keyring check before it): a keyring that holds the impostor's keyblock lets gpgv say
    "Good signature" for the impostor; VALIDSIG's primary key fingerprint must still be the pin."""
    from constructs_lib.signed_download import verified

    bin_, serve = tmp_path / "bin", tmp_path / "serve"
    serve.mkdir()
    curl_on_path(bin_)
    keyring = tmp_path / "ring.gpg"
    subprocess.run(["gpg", "--homedir", str(tmp_path), "--batch", "--dearmor", "--output", str(keyring),
                    str(keys.key_file(tmp_path / "keys.asc", "pinned", "impostor"))], check=True, capture_output=True)
    (serve / "payload.tar.gz").write_bytes(b"payload")
    keys.sign(signer, serve / "payload.tar.gz")
    script = verified(url="https://example.com/payload.tar.gz", name="payload.tar.gz", keyring=str(keyring),
                      fingerprint=keys.fingerprint("pinned"))
    run = subprocess.run(["bash", "-c", f"set -euo pipefail\ncd {tmp_path}\n{script}"], capture_output=True, text=True,
                         timeout=60, env={"PATH": f"{bin_}:/usr/bin:/bin", "SERVE": str(serve),
                                          "TMPDIR": short_tmpdir()})
    assert (run.returncode == 0) == passes, run.stderr
    assert passes or "VALIDSIG names another primary key" in run.stderr
