"""The cluster's node image: the plan's software stack on its Deep Learning AMI, plus what AWS PCS needs, baked once.

AWS PCS runs only on AMIs with its agent and PCS-built Slurm installed (PCS user guide,
"AMIs for AWS PCS"; aws-hpc-recipes dlami_for_pcs bakes the DLAMI the same way). The parent
image is the pinned release's DLAMI (driver, EFA, and on GPUs the AWS OFI NCCL plugin), found at deploy time
(constructs_lib/parent_image.py); the framework is pinned in workloads/catalog/software.yaml. The first `cdk deploy`
waits for the bake; deleting the stack deletes the baked AMI and its snapshot.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Fn, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_imagebuilder as imagebuilder
from aws_cdk import aws_s3 as s3
from constructs import Construct

from workloads.catalog import SoftwareStack, load_software
from workloads.catalog.node_locks import node_lock
from workloads.planning.launches import NODE_IMAGE_BUILD_TYPE
from workloads.planning.train_commands import EXAMPLES_ON_NODE  # one definition, with the Submit line

from .examples_archive import joins, packed_examples
from .logs_key import kept_log_group
from .nag import acknowledge_managed_policies, acknowledge_prefix_grants, acknowledge_wildcards
from .node_bootstrap import OFI_NCCL_DIRS
from .node_metrics import bake_script as metrics_bake_script
from .parent_image import ParentImage
from .signed_download import pinned_keyring, verified
from .ssm_access import agent_statements

SLURM_VERSION = "25.11"
ML_VENV = "/opt/ml-venv"
# Where a bake's logs go in the estate's logs bucket (AWSTOE's step output, the first place to look when a bake fails):
# Image Builder uploads them from the build instance as its instance profile (CloudFormation,
# AWS::ImageBuilder::InfrastructureConfiguration Logging / S3Logs), so that role may write here and nowhere else.
BAKE_LOG_PREFIX = "image-builder/"

APT = "apt-get -o DPkg::Lock::Timeout=900"  # Ubuntu's unattended upgrades hold the dpkg lock after boot


@dataclass(frozen=True)
class BakeStep:
    """One AWSTOE ExecuteBash step of the bake. A failed bake costs the user 30-45 minutes, so every
    step is either required, with a `check` that proves it did its job (a failing check aborts the
    bake with the step's name), or optional, allowed to fail (AWSTOE onFailure: Continue)."""

    name: str
    script: str
    check: str | None  # None: optional

    def commands(self) -> str:
        lines = ["set -euxo pipefail", self.script.strip()]
        if self.check:
            lines += [f"# check: {self.name} did its job", self.check]
        return "\n".join(lines)


# The PCS agent, pinned and verified as the PCS user guide shows ("Step 2 - Install the AWS PCS agent", steps 4-5,
# https://docs.aws.amazon.com/pcs/latest/userguide/working-with_ami_custom_install-pcs-agent.html): the versioned
# tarball (not -latest), the AWS PCS public key checked against its published fingerprint, then the tarball's
# detached signature; the installer runs only after both hold.
PCS_AGENT_VERSION = "1.3.1-1"
PCS_KEY_FINGERPRINT = "1C24 32C1 862F 64D1 F90A  239A 7EEF 030E DDF5 C21C"
# The Slurm installer, pinned and verified the same way ("Step 3 - Install Slurm",
# https://docs.aws.amazon.com/pcs/latest/userguide/working-with_ami_custom_install-slurm.html): the guide downloads
# aws-pcs-slurm/aws-pcs-slurm-<major>-installer-<version>-<release>.tar.gz, says `latest` in place of the version
# gets the newest, and verifies the tarball's .sig with the same AWS PCS key and fingerprint. NOT CONFIRMED at AWS's
# source: that 25.11.2-1 is published (the stored guide names 25.05.5-1; 25.11.2-1 is seen only in a third-party
# Image Builder component). A version that is not published fails the bake's first step (curl -f), not a later one.
SLURM_INSTALLER_VERSION = "25.11.2-1"
PCS_KEYRING = "/tmp/aws-pcs-pinned.gpg"  # the PCS key alone (signed_download.py): nothing else signs for PCS


def bake_steps(*, software: SoftwareStack, region: str) -> list[BakeStep]:
    slurm_bin = f"/opt/aws/pcs/scheduler/slurm-{SLURM_VERSION}/bin"
    agent = f"aws-pcs-agent-v{PCS_AGENT_VERSION}.tar.gz"
    slurm = f"aws-pcs-slurm-{SLURM_VERSION}-installer-{SLURM_INSTALLER_VERSION}.tar.gz"
    slurm_version, slurm_release = SLURM_INSTALLER_VERSION.rsplit("-", 1)
    repo = "https://aws-pcs-repo-$R.s3.$R.amazonaws.com"
    pcs = BakeStep("InstallPcsAgentAndSlurm", f"""
R={region}
cd /tmp
{pinned_keyring(key_url="https://aws-pcs-repo-public-keys-$R.s3.$R.amazonaws.com/aws-pcs-public-key.pub",
                fingerprint=PCS_KEY_FINGERPRINT, keyring=PCS_KEYRING, what="AWS PCS public key")}
{verified(url=f"{repo}/aws-pcs-agent/{agent}", name=agent, keyring=PCS_KEYRING,
          fingerprint=PCS_KEY_FINGERPRINT)}
{verified(url=f"{repo}/aws-pcs-slurm/{slurm}", name=slurm, keyring=PCS_KEYRING,
          fingerprint=PCS_KEY_FINGERPRINT)}
tar zxf {agent} && (cd aws-pcs-agent && ./installer.sh -y)
tar zxf {slurm} && (cd aws-pcs-slurm-{SLURM_VERSION}-installer && ./installer.sh -y)
echo "/opt/aws/pcs/scheduler/slurm-{SLURM_VERSION}/lib" > /etc/ld.so.conf.d/slurm-{SLURM_VERSION}.conf && ldconfig
echo 'export PATH={slurm_bin}:$PATH' > /etc/profile.d/slurm.sh""",
                   # The installer's version file (the guide's step 6) names what was built.
                   check=(f"test -s /opt/aws/pcs/version && {slurm_bin}/sinfo --version && "
                          f"grep -qx \"SLURM_VERSION='{slurm_version}'\" /opt/aws/pcs/scheduler/slurm-{SLURM_VERSION}/version"
                          f" && grep -qx \"PCS_SLURM_RELEASE='{slurm_release}'\" "
                          f"/opt/aws/pcs/scheduler/slurm-{SLURM_VERSION}/version"))
    lustre = BakeStep("InstallLustreClient", lustre_script(LUSTRE_KEY_FINGERPRINT), check="modinfo lustre")
    return [*parent_checks(software, region=region), pcs, lustre, install_metrics(software),
            install_framework(software), *install_nxd_training(software), *network_checks(software),
            *ship_examples()]


# The FSx for Lustre Ubuntu repository's key (FSx User Guide, "Installing the Lustre client", Ubuntu:
# https://docs.aws.amazon.com/fsx/latest/LustreGuide/install-lustre-client.html) is published with no fingerprint, and
# its fingerprint was not read here: None until someone verifies the key out of band and records it. Without it the
# bake adds no repository: a parent with a Lustre client (the step then does nothing) bakes, one without fails here.
LUSTRE_KEY_URL = "https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-ubuntu-public-key.asc"
LUSTRE_KEY_FINGERPRINT: str | None = None
LUSTRE_KEYRING = "/usr/share/keyrings/fsx-ubuntu-public-key.gpg"


def lustre_script(fingerprint: str | None) -> str:
    """The Lustre client from the FSx apt repository, only when the parent lacks one, signed-by a keyring holding the
    pinned key alone; no pinned fingerprint: the bake stops rather than trust whatever key the URL serves."""
    if fingerprint is None:
        return f"""
if ! modinfo lustre >/dev/null 2>&1; then
  echo "the parent DLAMI has no Lustre client, and the FSx repository key {LUSTRE_KEY_URL} has no pinned fingerprint \\
(node_image.LUSTRE_KEY_FINGERPRINT): not installing from an unverified repository" >&2
  exit 1
fi"""
    key = pinned_keyring(key_url=LUSTRE_KEY_URL, fingerprint=fingerprint, keyring=LUSTRE_KEYRING,
                         what="FSx Lustre client repository key").replace("\n", "\n  ")
    return f"""
if ! modinfo lustre >/dev/null 2>&1; then
  {key}
  echo "deb [signed-by={LUSTRE_KEYRING}] https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu $(lsb_release -cs) main" \\
    > /etc/apt/sources.list.d/fsxlustreclientrepo.list
  {APT} update
  {APT} install -y "lustre-client-modules-$(uname -r)" || {APT} install -y lustre-client-modules-aws
fi"""


def install_metrics(software: SoftwareStack) -> BakeStep:
    """The CloudWatch agent, pinned and signature-checked, and on Neuron what its monitor's CloudWatch script needs
    (node_metrics.py); each node starts them at boot with its cluster's configuration."""
    script, check = metrics_bake_script(accelerator_kind=accelerator_kind(software), apt=APT)
    return BakeStep("InstallCloudWatchAgent", script, check=check)


def accelerator_kind(software: SoftwareStack) -> str:
    """The accelerator family a pinned stack trains on: CUDA stacks on NVIDIA GPUs, the others on Trainium."""
    return "nvidia-gpu" if software.device == "cuda" else "trainium"


def parent_checks(software: SoftwareStack, *, region: str) -> list[BakeStep]:
    """First, before 30 minutes of installs: the parent is the DLAMI of the release the pins come from. Neuron publishes
    SSM parameters for the latest DLAMI only and names the release in each DLAMI's description (software.yaml source
    neuron-dlami-ssm), so the bake reads its own AMI's description and refuses another release's parent."""
    if not software.neuron_release:
        return []
    wanted = software.release_marker
    return [BakeStep("CheckParentRelease", f"""
TOKEN=$(curl -fsS -X PUT http://169.254.169.254/latest/api/token -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')
AMI=$(curl -fsS -H "X-aws-ec2-metadata-token: $TOKEN" http://169.254.169.254/latest/meta-data/ami-id)
DESCRIPTION=$(aws ec2 describe-images --region {region} --image-ids "$AMI" --query 'Images[0].Description' --output text)
echo "parent $AMI: $DESCRIPTION"
""", check=(
        f'[[ "$DESCRIPTION" == *"{wanted}"* ]] || {{ echo "the parent DLAMI is not {wanted}: update the pins and '
        f'neuron_release in workloads/catalog/software.yaml together" >&2; exit 1; }}'))]


def install_framework(software: SoftwareStack) -> BakeStep:
    """The plan's pinned stack (workloads/catalog/software.yaml) in its own venv; the check proves the pinned torch
    (and, on Trainium, torch_neuronx; on the XLA path torch_xla) imports. The DLAMI's python3 has no ensurepip until
    python3-venv is installed. The venv records the stack's train.py --device in DEVICE for the sbatch scripts.
    Where the stack has a hash lock (catalog/node_locks.py), every wheel comes from it: `--require-hashes --no-deps`
    refuses a wheel whose bytes differ from the lock's sha256 and any dependency the lock does not name."""
    indexes = "".join(f" --extra-index-url {url}" for url in software.index_urls)
    extra = {"neuron": ", torch_neuronx", "xla": ", torch_neuronx, torch_xla"}.get(software.device, "")
    locked = node_lock(software.device)
    if locked is not None:
        lines = "\n".join(line for line in locked.text.splitlines() if line.strip() and not line.lstrip().startswith("#"))
        install = f"""# Every wheel by exact version and sha256: catalog/locks/{software.device}.txt (tools/lock_node_packages.py)
cat > {ML_VENV}/node-lock.txt <<'LOCK'
{lines}
LOCK
{ML_VENV}/bin/pip install --require-hashes --no-deps --only-binary=:all:{indexes} -r {ML_VENV}/node-lock.txt"""
    else:
        packages = " ".join(f"'{p}'" for p in software.pip)
        examples = " ".join(f"'{p}'" for p in load_software().example_pip)
        install = f"""# NOT hash-locked (no catalog/locks/{software.device}.txt): dependencies resolve from the index at bake time
{ML_VENV}/bin/pip install{indexes} {packages}
# The example trainer's and prepare step's own packages (catalog/software.yaml example_pip)
{ML_VENV}/bin/pip install {examples}"""
    return BakeStep("InstallFramework", f"""
# {software.name}
{APT} update
{APT} install -y python3-venv python3-pip
python3 -m venv {ML_VENV}
{install}
echo {software.device} > {ML_VENV}/DEVICE""", check=(
        f"{ML_VENV}/bin/python -c 'import numpy, tokenizers, safetensors, torch{extra}; v = torch.__version__; print(v); "
        f"assert v.startswith(\"{software.torch}.\"), v'"))


def install_nxd_training(software: SoftwareStack) -> list[BakeStep]:
    """Trn1/Trn1n (Neuron 2.28's XLA stack): NxD Training for the layouts beyond data parallel (planning/nxd.py), in
    its own venv (its dependencies pin numpy below the shipped trainer's). On the Neuron 2.28 DLAMI the venv is
    pre-installed and Neuron's setup_nxdt.sh completes it (catalog/nxd.yaml source neuron-2-28-dlami-venvs); on an
    AMI without it (HyperPod's) the venv is made from the pins, NxD Training's requirements and its install_setup.sh at
    the pinned commit (its installation guide). NxD Training's launcher and converter come from that commit. The
    check proves the pinned versions are the ones installed and that the launcher is in place."""
    from workloads.planning.nxd import load_nxd

    if software.device != "xla":
        return []
    stack = load_nxd().stack
    venv, commit, repo = stack["venv"], stack["examples_commit"], stack["examples_repo"]
    pins = " ".join(f"'{name}=={version}'" for name, version in stack["pins"].items())
    neuron = " ".join(f"'{p}'" for p in software.pip if not p.startswith("neuronx_distributed"))
    indexes = "".join(f" --extra-index-url {url}" for url in software.index_urls)
    wanted = "; ".join(f"assert version('{name}') == '{version}', ('{name}', version('{name}'))"
                       for name, version in stack["pins"].items())
    return [BakeStep("InstallNxdTraining", f"""
# NxD Training {stack['pins']['neuronx_distributed_training']} (Neuron {stack['neuron_release']}); its launcher and converter from {commit}: the repository's {stack['examples_release']} release (NxD Training {stack['examples_version']}), its last public commit
mkdir -p /opt/nxdt && cd /opt/nxdt
curl -fsSL https://codeload.github.com/{repo}/tar.gz/{commit} | tar -xz --strip-components=1
if [ ! -x {venv}/bin/python ]; then
  python3 -m venv {venv}
  {venv}/bin/pip install{indexes} {neuron} {pins}
  {venv}/bin/pip install -r /opt/nxdt/requirements.txt
  (source {venv}/bin/activate && cd /tmp && bash /opt/nxdt/install_setup.sh)
else
  (source {venv}/bin/activate && cd /tmp && {stack['setup_script']})
fi
{venv}/bin/pip install{indexes} {pins}""", check=(
        f"{venv}/bin/python -c \"from importlib.metadata import version; {wanted}\" && "
        + " && ".join(f"test -s /opt/nxdt/{path}" for path in stack["examples"])))]


def network_checks(software: SoftwareStack) -> list[BakeStep]:
    """GPU jobs need the AWS OFI NCCL plugin the DLAMI ships, or NCCL talks TCP: fail the bake if it is missing."""
    if software.device != "cuda":
        return []
    found = " || ".join(f"compgen -G '{d}/libnccl-net*.so'" for d in OFI_NCCL_DIRS)
    return [BakeStep("CheckOfiNcclPlugin", "ls -l /opt/amazon/efa/lib/ /opt/amazon/ofi-nccl/lib/ || true",
                     check=found)]


def framework_script(software: SoftwareStack) -> str:
    """The bake's framework steps as one script, for nodes this toolkit does not bake (HyperPod's own AMI): the same
    pinned stack and checks, and on GPUs one more, that torch reaches the GPUs: a driver older than the wheel's
    CUDA needs fails here, at node creation, instead of in the first job."""
    steps = [install_framework(software), *install_nxd_training(software), *network_checks(software)]
    if software.device == "cuda":
        steps.append(BakeStep("CheckTorchSeesTheGpus", "nvidia-smi -L", check=(
            f"{ML_VENV}/bin/python -c 'import torch; assert torch.cuda.is_available(), "
            f"\"torch \" + torch.__version__ + \" cannot use this driver\"; print(torch.cuda.device_count())'")))
    body = "\n".join(f"(\n# {step.name}\n{step.commands()}\n)" for step in steps)
    return f"#!/bin/bash\n# {software.name}, as the PCS node image bakes it.\nset -euo pipefail\n{body}\n"


# An Image Builder component's document is at most 16,000 characters (CloudFormation, AWS::ImageBuilder::Component
# Data: "Maximum: 16000"): the bake's steps are packed, in order, into as many components as that takes.
COMPONENT_MAX_CHARS = 16000


def _document(entries: list[list[str]]) -> str:
    lines = ["name: ml-estate-node", "description: AWS PCS agent, Slurm, Lustre client and ML examples",
             "schemaVersion: 1.0", "phases:", "  - name: build", "    steps:"]
    return "\n".join(lines + [line for entry in entries for line in entry]) + "\n"


def component_documents(*, software: SoftwareStack, region: str) -> list[str]:
    """The Image Builder components (AWSTOE YAML), run in order: PCS agent and Slurm, Lustre client, frameworks,
    checks, examples; each within COMPONENT_MAX_CHARS. A step larger than a component alone is a bug: refused."""
    documents, entries = [], []
    for step in bake_steps(software=software, region=region):
        entry = [f"      - name: {step.name}", "        action: ExecuteBash"]
        if step.check is None:
            entry.append("        onFailure: Continue")
        entry += ["        inputs:", "          commands:", "            - |",
                  *(f"              {line}" for line in step.commands().splitlines())]
        if entries and len(_document([*entries, entry])) > COMPONENT_MAX_CHARS:
            documents.append(_document(entries))
            entries = []
        entries.append(entry)
        if len(_document([entry])) > COMPONENT_MAX_CHARS:
            raise ValueError(f"bake step {step.name} alone exceeds an Image Builder component's {COMPONENT_MAX_CHARS}")
    return [*documents, _document(entries)]


def ship_examples() -> list[BakeStep]:
    """One step per archive (ShipExamples, ShipExamples2, ...), then ExamplesArrived, which joins the parts of a file
    too large for one step (examples_archive.PART, in order, mode 755 as the archives give) and checks every file
    arrived: a step of its own, so the largest archive has a component's whole room beside its two lines."""
    packed = packed_examples()
    shipped = [name for group, _ in packed for name in group]
    split = joins(shipped)
    names = " ".join(dict.fromkeys(next((w for w, parts in split.items() if n in parts), n) for n in shipped))
    join = "".join(f"\ncat {' '.join(parts)} > {whole} && chmod 755 {whole} && rm {' '.join(parts)}"
                   for whole, parts in split.items())
    every = f"cd {EXAMPLES_ON_NODE} && for f in {names}; do test -s $f || exit 1; done"
    return [*(BakeStep("ShipExamples" + (str(i + 1) if i else ""), f"""
mkdir -p {EXAMPLES_ON_NODE}
echo '{archive}' | base64 -d | tar -xJ --no-same-owner -C {EXAMPLES_ON_NODE}""", check=f"test -d {EXAMPLES_ON_NODE}")
              for i, (_, archive) in enumerate(packed)),
            BakeStep("ExamplesArrived", f"cd {EXAMPLES_ON_NODE}{join}\nls -l {EXAMPLES_ON_NODE}",
                     check=f"{every} && bash -n {EXAMPLES_ON_NODE}/train-gpu.sbatch")]


class NodeImage(Construct):
    """Bakes the node AMI in the cluster's private subnet; `image_id` is the result."""

    def __init__(self, scope: Construct, construct_id: str, *, software: SoftwareStack, subnet: ec2.ISubnet,
                 security_group: ec2.ISecurityGroup, logs: s3.IBucket, logs_key: kms.IKey, root_volume_gib: int,
                 build_instance_type: str = NODE_IMAGE_BUILD_TYPE) -> None:
        """`logs`: the estate's logs bucket; the bake's logs go under BAKE_LOG_PREFIX, kept when a bake fails.
        `root_volume_gib`: the nodes' root volume (workloads.catalog Software.root_volume_gib): the image's snapshot
        is that size, so every node launched from it gets at least as much."""
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        documents = component_documents(software=software, region=stack.region)
        # The pinned release's DLAMI, found at deploy time (never an SSM `latest` parameter, which moves).
        self.parent = ParentImage(self, "Parent", software=software, logs_key=logs_key)
        # Image Builder resources are named and immutable: the content hash (and the parent's query, which decides
        # the parent AMI) makes a changed recipe a new resource, the stack name keeps two teams' images apart.
        digest = hashlib.sha256(("".join(documents) + json.dumps(self.parent.query, sort_keys=True)
                                 + self.parent.marker).encode()).hexdigest()[:10]
        name = f"{stack.stack_name}-node-{software.device}-{digest}"

        # The build instance's own statements, in place of the managed EC2InstanceProfileForImageBuilder and
        # AmazonSSMManagedInstanceCore (the latter reads every SSM parameter of the account, the former writes every
        # /aws/imagebuilder/ group): what the SSM Agent needs for Image Builder to drive the bake through Systems
        # Manager, AWSTOE's download of its own binaries and of this image's components, and this bake's log group.
        role = iam.Role(self, "BuildRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
                        description="Image Builder build instance for the cluster node image")
        for statement in build_statements(region=stack.region, account=stack.account, partition=stack.partition):
            role.add_to_principal_policy(statement)
        acknowledge_wildcards(role, actions=[], resources=["*", f"arn:{stack.partition}:ec2:{stack.region}:"
                                                                f"{stack.account}:instance/*",
                              f"arn:{stack.partition}:imagebuilder:{stack.region}:{stack.account}:component/*",
                              f"arn:{stack.partition}:s3:::ec2imagebuilder*"], reason=(
            "The SSM Agent's channel and message actions take no resource ARN; the build instance's ID is not known "
            "before Image Builder launches it; components are read in this account and region only; AWSTOE and "
            "Image Builder's own components come from Image Builder's ec2imagebuilder* buckets."))
        logs.grant_put(role, BAKE_LOG_PREFIX + "*")
        acknowledge_prefix_grants(role, bucket=logs, prefixes=[BAKE_LOG_PREFIX], reason=(
            "The build instance uploads the bake's logs to their own prefix of the logs bucket, nothing else; the "
            "wildcard actions are CDK's put grant on that prefix and the bucket's key."))
        if parent_checks(software, region=stack.region):
            # CheckParentRelease reads its own AMI's description; DescribeImages takes no resource ARN (Service
            # Authorization Reference, Amazon EC2 actions).
            role.add_to_principal_policy(iam.PolicyStatement(actions=["ec2:DescribeImages"], resources=["*"]))
            acknowledge_wildcards(role, resources=["*"], reason=(
                "ec2:DescribeImages, read-only, has no resource-level permissions; the bake reads its parent's "
                "description to refuse a DLAMI of another Neuron release."))
        profile = iam.CfnInstanceProfile(self, "BuildProfile", roles=[role.role_name])
        # The first keeps its logical ID; the others are numbered.
        components = [imagebuilder.CfnComponent(self, "Component" if i == 0 else f"Component{i + 1}",
                                                name=name if i == 0 else f"{name}-{i + 1}", platform="Linux",
                                                version="1.0.0", data=document,
                                                description=f"PCS agent, Slurm, Lustre client, frameworks ({i + 1} of "
                                                            f"{len(documents)})")
                      for i, document in enumerate(documents)]
        recipe = imagebuilder.CfnImageRecipe(
            self, "Recipe", name=name, version="1.0.0",
            parent_image=self.parent.image_id,
            components=[imagebuilder.CfnImageRecipe.ComponentConfigurationProperty(component_arn=c.attr_arn)
                        for c in components],
            block_device_mappings=[imagebuilder.CfnImageRecipe.InstanceBlockDeviceMappingProperty(
                device_name="/dev/sda1",
                ebs=imagebuilder.CfnImageRecipe.EbsInstanceBlockDeviceSpecificationProperty(
                    volume_size=root_volume_gib, volume_type="gp3", encrypted=True, delete_on_termination=True))],
        )
        infrastructure = imagebuilder.CfnInfrastructureConfiguration(
            self, "Infrastructure", name=name, instance_profile_name=profile.ref,
            instance_types=[build_instance_type], subnet_id=subnet.subnet_id,
            security_group_ids=[security_group.security_group_id], terminate_instance_on_failure=True,
            instance_metadata_options=imagebuilder.CfnInfrastructureConfiguration.InstanceMetadataOptionsProperty(
                http_tokens="required"),
            logging=imagebuilder.CfnInfrastructureConfiguration.LoggingProperty(
                s3_logs=imagebuilder.CfnInfrastructureConfiguration.S3LogsProperty(
                    s3_bucket_name=logs.bucket_name, s3_key_prefix=BAKE_LOG_PREFIX.rstrip("/"))),
        )
        # Image Builder also logs the build to CloudWatch Logs, under /aws/imagebuilder/<image name> unless the image
        # names a group (AWS::ImageBuilder::Image ImageLoggingConfiguration): made first, with the estate's key and
        # retention, so the service does not create it unencrypted and kept forever. Its name is not the image's,
        # which a stack deleted and deployed again reuses and would find kept ("already exists"), but the build role's,
        # which CloudFormation generates anew each time; it stays under /aws/imagebuilder/, where the build instance's
        # and the service's managed policies may write (EC2InstanceProfileForImageBuilder, AWSServiceRoleForImageBuilder).
        bake_logs = kept_log_group(self, "BakeLogGroup", key=logs_key,
                                   name=Fn.join("", ["/aws/imagebuilder/", role.role_name]))
        bake_logs.grant_write(role)  # this group, not every /aws/imagebuilder/ group of the account
        # The baked AMI and its snapshot go with the image (replaced or deleted), not left billing: Image Builder deletes
        # them as this role (CloudFormation, AWS::ImageBuilder::Image DeletionSettings; the role is the one the Image
        # Builder User Guide has lifecycle actions run as: trusted by Image Builder, with the AWS managed
        # EC2ImageBuilderLifecycleExecutionPolicy, which deregisters and deletes only what Image Builder created).
        cleanup = iam.Role(self, "DeletionRole", assumed_by=iam.ServicePrincipal("imagebuilder.amazonaws.com"),
                           description="Image Builder deletes the node image's AMI and snapshots with the stack",
                           managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(
                               "service-role/" + _DELETION_POLICY)])
        acknowledge_managed_policies(cleanup, ["service-role/" + _DELETION_POLICY], reason=(
            "The AWS-maintained policy Image Builder documents for deleting its images' AMIs and snapshots; its "
            "statements are conditioned on the resources Image Builder created (CreatedBy: EC2 Image Builder)."))
        self.image = imagebuilder.CfnImage(
            self, "Image", image_recipe_arn=recipe.attr_arn,
            deletion_settings=imagebuilder.CfnImage.DeletionSettingsProperty(execution_role=cleanup.role_arn),
            infrastructure_configuration_arn=infrastructure.attr_arn,
            image_tests_configuration=imagebuilder.CfnImage.ImageTestsConfigurationProperty(image_tests_enabled=False),
            # Enhanced metadata (on by default: CreateImage enhancedImageMetadataEnabled) is gathered through SSM
            # Inventory, which the build role is not granted (ssm:PutInventory and the association calls of
            # AmazonSSMManagedInstanceCore); the image's packages are the bake's pinned, hash-checked ones anyway.
            enhanced_image_metadata_enabled=False,
            logging_configuration=imagebuilder.CfnImage.ImageLoggingConfigurationProperty(
                log_group_name=bake_logs.log_group_name),
        )
        self.image.node.add_dependency(role.node.find_child("DefaultPolicy"))  # the log grant exists before the bake
        self.image_id = self.image.attr_image_id


def build_statements(*, region: str, account: str, partition: str) -> list[iam.PolicyStatement]:
    """The build instance's rights besides its log group and log prefix. Image Builder runs each build step through
    Systems Manager (Run Command), so the SSM Agent registers (UpdateInstanceInformation) and takes commands over its
    channels (AWS Systems Manager User Guide, "Step 2: Verify or add instance permissions for Systems Manager": the
    ssmmessages and ec2messages actions); AWSTOE reads this image's components (imagebuilder:GetComponent) and
    downloads itself from Image Builder's buckets, as the managed EC2InstanceProfileForImageBuilder allows."""
    return [
        *agent_statements(partition=partition, region=region, account=account),
        iam.PolicyStatement(sid="ReadComponents", actions=["imagebuilder:GetComponent"],
                            resources=[f"arn:{partition}:imagebuilder:{region}:{account}:component/*"]),
        iam.PolicyStatement(sid="DownloadAwstoe", actions=["s3:GetObject"],
                            resources=[f"arn:{partition}:s3:::ec2imagebuilder*"]),
    ]


# AWS Managed Policy Reference, EC2ImageBuilderLifecycleExecutionPolicy (arn:aws:iam::aws:policy/service-role/...):
# https://docs.aws.amazon.com/aws-managed-policy/latest/reference/EC2ImageBuilderLifecycleExecutionPolicy.html
_DELETION_POLICY = "EC2ImageBuilderLifecycleExecutionPolicy"
