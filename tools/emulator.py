"""A local AWS emulator (moto server) and the CDK CLI pointed at it, never at a real account.

moto's CloudFormation creates the resource types it models and skips the others (FSx,
placement groups, bucket policies, ...): `deployed_resources` reports exactly which.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from workloads.commands.emulator_target import DEPLOY_OPTIONS, LOCAL_HOSTS

ROOT = Path(__file__).resolve().parent.parent
CDK = ROOT / "node_modules" / ".bin" / "cdk"
SKIPPED_PREFIX = "skipped-by-emulator:"
LAMBDA_BACKED = ("Custom::CDKBucketDeployment", "Custom::VpcRestrictDefaultSG", "Custom::AWS")
# What deploys before the InferenceStack (stacks/estate.py), whose artifact check needs the DataStack's bucket
# filled; a team's stage adds its guardrails first and its ML users' stack last (stacks/team_stage.py).
BEFORE_INFERENCE = ("JobLogsStack", "NetworkStack", "DataStack", "TrainStack")
TEAM_STACKS = ("GuardrailsStack", "MlUsersStack")
# Credentials and settings that could point the CLI at a real account: removed for the demo.
_REAL_ACCOUNT_VARS = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ROLE_ARN",
                      "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                      "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN")


class NotLocalError(RuntimeError):
    pass


def require_local(endpoint: str) -> None:
    """The emulator tooling refuses any endpoint that is not this machine."""
    host = urlparse(endpoint).hostname
    if host not in LOCAL_HOSTS:
        raise NotLocalError(f"refusing to deploy: endpoint {endpoint!r} is not local ({', '.join(sorted(LOCAL_HOSTS))})")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _patch_moto() -> None:
    """Two gaps of moto 5.2 that real AWS does not have; the templates stay exactly as deployed to AWS.

    - CloudFormation KMS key tags arrive as {Key, Value}; moto reads {TagKey, TagValue}. Its KeyPolicy arrives as an
      object, which moto keeps as is and then fails (500) to parse in DescribeKey; it is kept as the JSON text the
      KMS API keeps.
    - moto's SageMaker endpoint configs accept only 2020-era instance types (no inf2, g5, p4d ...);
      every SageMaker type in our catalog is accepted as AWS accepts it.
    - Lambda-backed custom resources (CDK's BucketDeployment, the default security group's restriction) would wait forever for a Lambda the
      emulator cannot run (no Docker); they are skipped like the types moto has no model for. The InferenceStack's
      artifact check is run instead: its handler's own function, in-process, against the emulated bucket; a missing
      artifact fails the stack's creation with the handler's reason, as CloudFormation does (ROLLBACK_COMPLETE).
    - moto's SageMaker endpoint configs read a model from every variant; a variant hosting inference components names
      none (AWS's CreateEndpointConfig accepts it), so only the variants that name one are checked. moto 5.2 has no
      InferenceComponent at all (no model in moto/sagemaker, no CloudFormation type): the component is skipped and
      reported like FSx, and `invoke` cannot be answered locally for a component endpoint.
    - moto drops ProcessingResources (instance type and count) from processing jobs; it keeps them.
    - Deleting, it keeps what CloudFormation keeps: `Retain` and `RetainExceptOnCreate` resources when a stack is
      deleted, only `Retain` ones when a failed create rolls back (moto knows `Retain` alone). It refuses, as
      CloudFormation does, to delete a termination-protected stack (and serves UpdateTerminationProtection), and
      fails the deletion of a stack whose exports another stack imports (DELETE_FAILED, the export and its user named).
    - The node image's parent lookup (Custom::ParentImage) is run like the artifact check: the handler's own rule,
      in-process, against the emulator's DescribeImages, where a PLACEHOLDER image stands for each pinned DLAMI
      (moto's public image list has none); a pinned release the emulator does not list fails the stack's creation.
    - A Ref or GetAtt to a resource type moto skips (FSx, PCS, Image Builder ...) fails the whole
      stack; it resolves to a visible placeholder "skipped-by-emulator:<LogicalId>" instead, and
      moto's check of output attributes passes over types it has no model for.
    """
    from moto.cloudformation import parsing
    from moto.cloudformation.models import Event
    from moto.cloudformation.models import Stack as FakeStack

    from constructs_lib.endpoints import artifact_check_handler as artifact_check
    from workloads.commands import dlami
    from moto.kms.models import Key
    from moto.sagemaker.models import FakeEndpointConfig

    from workloads.catalog import load_catalog

    if getattr(Key, "_tags_patched", False):
        return
    original = Key.create_from_cloudformation_json.__func__
    known = set(load_catalog().names(sagemaker=True))
    validate = FakeEndpointConfig.validate_instance_type

    def validate_instance_type(self, instance_type: str) -> None:
        if instance_type not in known:
            validate(self, instance_type)

    FakeEndpointConfig.validate_instance_type = validate_instance_type
    from moto.sagemaker.models import SageMakerModelBackend

    check_variants = SageMakerModelBackend.validate_production_variants

    def validate_production_variants(self, production_variants):
        # A variant that hosts inference components names no model (CreateEndpointConfig, ManagedInstanceScaling);
        # moto 5.2 reads ModelName of every variant (KeyError, answered 500). Its models are still checked.
        check_variants(self, [v for v in production_variants if "ModelName" in v])

    SageMakerModelBackend.validate_production_variants = validate_production_variants

    clean_json = parsing.clean_json

    def clean_json_with_skipped(resource_json, resources_map):
        if isinstance(resource_json, dict) and ("Ref" in resource_json or "Fn::GetAtt" in resource_json):
            target = resource_json["Ref"] if "Ref" in resource_json else resource_json["Fn::GetAtt"][0]
            declared = getattr(resources_map, "_resource_json_map", {})  # only a stack's ResourceMap has one
            if target in declared and resources_map.get(target) is None:
                attribute = resource_json.get("Fn::GetAtt", [None, ""])[1]
                if attribute.endswith("Arn"):  # keep ARNs ARN-shaped: IAM policies are validated
                    return f"arn:aws:{SKIPPED_PREFIX}::{target}"
                return SKIPPED_PREFIX + target
        return clean_json(resource_json, resources_map)

    parsing.clean_json = clean_json_with_skipped

    validate_outputs = parsing.ResourceMap.validate_outputs

    def validate_outputs_with_skipped(self):
        try:
            validate_outputs(self)
        except AttributeError:  # an output's GetAtt names a type moto has no model for
            pass

    parsing.ResourceMap.validate_outputs = validate_outputs_with_skipped

    from moto.sagemaker.responses import SageMakerResponse

    create_processing_job = SageMakerResponse.create_processing_job

    def create_processing_job_with_resources(self):
        result = create_processing_job(self)
        job = self.sagemaker_backend.processing_jobs[self._get_param("ProcessingJobName")]
        job.processing_resources = self._get_param("ProcessingResources")  # described back as ProcessingResources
        return result

    SageMakerResponse.create_processing_job = create_processing_job_with_resources

    parse_and_create = parsing.parse_and_create_resource

    def parse_and_create_without_lambda(logical_id, resource_json, resources_map, account_id, region_name):
        if resource_json.get("Type") == artifact_check.RESOURCE_TYPE:
            return _check_artifacts(logical_id, resource_json, resources_map, region_name)
        if resource_json.get("Type") == dlami.RESOURCE_TYPE:
            return _find_parent(logical_id, resource_json, resources_map, region_name)
        if resource_json.get("Type", "").startswith(LAMBDA_BACKED):
            return None
        return parse_and_create(logical_id, resource_json, resources_map, account_id, region_name)

    parsing.parse_and_create_resource = parse_and_create_without_lambda

    create_resources = FakeStack.create_resources

    def create_resources_or_roll_back(self):
        try:
            create_resources(self)
        except CustomResourceFailed as failed:  # what CloudFormation shows: the resource's reason, then rollback
            self.events.append(Event(stack_id=self.stack_id, stack_name=self.name,
                                     logical_resource_id=failed.logical_id, physical_resource_id=failed.logical_id,
                                     resource_type=failed.type, resource_status="CREATE_FAILED",
                                     resource_status_reason=failed.reason, resource_properties=None))
            self._add_stack_event("ROLLBACK_IN_PROGRESS", resource_status_reason=(
                f"The following resource(s) failed to create: [{failed.logical_id}]. Rollback requested by user."))
            # The rollback deletes what was created (Retain kept); the stack then lists no resources and no outputs.
            # Left in the map, the failed resource was created, and failed, again on every DescribeStackResources:
            # a 500 the CDK CLI's failure investigation retried for 45 s.
            try:
                self.resource_map.delete(keep=ROLLBACK_KEEPS)
            except Exception:  # noqa: BLE001 - moto cannot delete every type; CloudFormation would report it too
                pass
            self.resource_map._resource_json_map = {}
            self.output_map._output_json_map, self.output_map._parsed_outputs = {}, {}
            self.status = "ROLLBACK_COMPLETE"
            self._add_stack_event("ROLLBACK_COMPLETE")

    FakeStack.create_resources = create_resources_or_roll_back
    _patch_change_set_outputs()
    _patch_deletion(parsing, FakeStack)
    _seed_parent_images()

    def create(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        props = cloudformation_json.get("Properties", {})
        if props.get("Tags"):
            props["Tags"] = [{"TagKey": t["Key"], "TagValue": t["Value"]} if "Key" in t else t for t in props["Tags"]]
        if isinstance(props.get("KeyPolicy"), dict):
            props["KeyPolicy"] = json.dumps(props["KeyPolicy"])
        return original(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)

    Key.create_from_cloudformation_json = classmethod(create)
    Key._tags_patched = True


def _patch_change_set_outputs() -> None:
    """moto builds a stack's outputs when the stack is created or updated directly, not when a change set is executed:
    `cdk bootstrap` (which deploys by change set) left CDKToolkit without the BootstrapVersion output that
    `preflight` and the CLI read. They are built from the executed template, as CloudFormation does."""
    from moto.cloudformation.models import CloudFormationBackend

    execute = CloudFormationBackend.execute_change_set

    def execute_with_outputs(self, change_set_name: str, stack_name: str | None = None) -> None:
        execute(self, change_set_name, stack_name)
        change_set = self.change_sets.get(change_set_name) or next(
            c for c in self.change_sets.values() if c.change_set_name == change_set_name)
        stack = self.stacks[change_set.stack_id]
        stack._parse_template()
        stack.output_map = stack._create_output_map()

    CloudFormationBackend.execute_change_set = execute_with_outputs


# DeletionPolicy values a deletion leaves in place (CloudFormation User Guide, "DeletionPolicy attribute"): deleting a
# stack keeps both kinds; rolling back a failed create deletes RetainExceptOnCreate resources too.
DELETE_KEEPS = ("Retain", "RetainExceptOnCreate")
ROLLBACK_KEEPS = ("Retain",)


def _patch_deletion(parsing, FakeStack) -> None:
    """moto's ResourceMap.delete skips DeletionPolicy `Retain` only; stack deletion checks nothing. See _patch_moto."""
    from moto.cloudformation.exceptions import ValidationError
    from moto.cloudformation.models import CloudFormationBackend
    from moto.cloudformation.responses import CloudFormationResponse
    from moto.core.responses import ActionResult

    delete_resources = parsing.ResourceMap.delete

    def delete_keeping(self, keep=DELETE_KEEPS):
        saved = self._resource_json_map
        self._resource_json_map = {lid: {**r, "DeletionPolicy": "Retain"} if r.get("DeletionPolicy") in keep else r
                                   for lid, r in saved.items()}
        try:
            delete_resources(self)
        finally:
            self._resource_json_map = saved

    parsing.ResourceMap.delete = delete_keeping

    delete_stack_resources = FakeStack.delete

    def delete_and_forget(self):
        delete_stack_resources(self)
        # Left in the map, a deleted resource is created again by moto's lazy map the next time anyone lists the
        # stack's resources (the CDK CLI does, while it waits), and its outputs are read from resources now gone.
        self.resource_map._resource_json_map = {}
        self.output_map._output_json_map, self.output_map._parsed_outputs = {}, {}

    FakeStack.delete = delete_and_forget

    delete_one = parsing.ResourceMap._delete_resource

    def delete_one_as_ec2_does(self, parsed_resource, resource_json):
        deleter = EC2_DELETERS.get(resource_json.get("Type"))
        if deleter is None:
            return delete_one(self, parsed_resource, resource_json)
        from moto.ec2.models import ec2_backends

        return deleter(ec2_backends[self._account_id][self._region_name], parsed_resource)

    parsing.ResourceMap._delete_resource = delete_one_as_ec2_does

    delete_stack = CloudFormationBackend.delete_stack

    def delete_stack_as_cloudformation(self, name_or_stack_id):
        stack = next((st for st in self.stacks.values() if name_or_stack_id in (st.stack_id, st.name)), None)
        if stack is None:
            return delete_stack(self, name_or_stack_id)
        if stack.enable_termination_protection:
            raise ValidationError(message=f"Stack [{stack.name}] cannot be deleted while TerminationProtection is "
                                          "enabled")
        ours = {export.name for export in stack.exports}
        for other in self.stacks.values():
            used = sorted(ours & imported(other.template_dict)) if other is not stack else []
            if used:
                stack._add_stack_event("DELETE_IN_PROGRESS", resource_status_reason="User Initiated")
                stack._add_stack_event("DELETE_FAILED", resource_status_reason=(
                    f"Export {used[0]} cannot be deleted as it is in use by {other.name}"))
                stack.status = "DELETE_FAILED"
                return None
        return delete_stack(self, stack.stack_id)

    CloudFormationBackend.delete_stack = delete_stack_as_cloudformation

    def update_termination_protection(self):
        stack = self.cloudformation_backend.get_stack(self._get_param("StackName"))
        stack.enable_termination_protection = str(self._get_param("EnableTerminationProtection")).lower() == "true"
        return ActionResult({"StackId": stack.stack_id})

    CloudFormationResponse.update_termination_protection = update_termination_protection


def _disassociate(ec2, association) -> None:
    for table in ec2.route_tables.values():
        for association_id, subnet in list(table._associations.items()):
            if table.id == association.route_table_id and subnet == association.subnet_id:
                ec2.disassociate_route_table(association_id)


def _delete_endpoint(ec2, endpoint) -> None:
    # A gateway endpoint's deletion removes its routes from the route tables that are still there.
    endpoint.route_table_ids = [t for t in endpoint.route_table_ids if t in ec2.route_tables]
    ec2.delete_vpc_endpoints([endpoint.id])


def _gone_counts_as_deleted(delete):
    """moto deletes a stack's resources in no dependency order (a route table before its routes): a resource whose
    parent went first is gone with it, as on AWS."""
    def run(ec2, resource) -> None:
        try:
            delete(ec2, resource)
        except Exception as error:  # noqa: BLE001 - moto's EC2 errors carry the AWS error code
            if not str(getattr(error, "code", "")).endswith("NotFound"):
                raise
    return run


# The EC2 types moto's CloudFormation creates but cannot delete (it skips them silently, and then the VPC, which they
# still use, refuses): the calls CloudFormation makes, on moto's own EC2 backend. A NAT gateway's deletion also
# deletes its network interface, as on AWS (moto only marks the gateway deleted).
EC2_DELETERS = {kind: _gone_counts_as_deleted(delete) for kind, delete in {
    "AWS::EC2::NatGateway": lambda ec2, r: (ec2.delete_nat_gateway(r.id), ec2.delete_network_interface(r._eni.id)),
    "AWS::EC2::EIP": lambda ec2, r: ec2.release_address(allocation_id=r.allocation_id),
    "AWS::EC2::FlowLog": lambda ec2, r: ec2.delete_flow_logs([r.id]),
    "AWS::EC2::VPCGatewayAttachment": lambda ec2, r: ec2.detach_internet_gateway(r.gateway_id, r.vpc_id),
    "AWS::EC2::InternetGateway": lambda ec2, r: ec2.delete_internet_gateway(r.id),
    "AWS::EC2::Route": lambda ec2, r: ec2.delete_route(r.route_table.id, r.destination_cidr_block),
    "AWS::EC2::RouteTable": lambda ec2, r: ec2.delete_route_table(r.id),
    "AWS::EC2::SubnetRouteTableAssociation": _disassociate,
    "AWS::EC2::VPCEndpoint": _delete_endpoint,
}.items()}


def imported(node) -> set[str]:
    """The export names a template's Fn::ImportValue reads (CDK writes them as plain strings)."""
    if isinstance(node, dict):
        found = {node["Fn::ImportValue"]} if isinstance(node.get("Fn::ImportValue"), str) else set()
        return found.union(*(imported(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(imported(v) for v in node))
    return set()


class CustomResourceFailed(Exception):
    def __init__(self, logical_id: str, resource_type: str, reason: str) -> None:
        super().__init__(reason)
        self.logical_id, self.type, self.reason = logical_id, resource_type, reason


_ENDPOINT: list[str] = []  # the running emulator's endpoint, for the checks run inside it


def _check_artifacts(logical_id, resource_json, resources_map, region_name):
    """Custom::ArtifactCheck in-process: the Lambda's own missing(), with an S3 client on the emulator."""
    import boto3
    from moto.cloudformation import parsing
    from moto.cloudformation.custom_model import CustomModel

    from constructs_lib.endpoints.artifact_check_handler import missing

    props = parsing.clean_json(resource_json.get("Properties", {}), resources_map)
    s3 = boto3.client("s3", region_name=region_name, endpoint_url=_ENDPOINT[-1], aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    reason = missing(s3, props["Bucket"], props["Artifacts"])
    if reason:
        raise CustomResourceFailed(logical_id, resource_json["Type"], reason)
    resource = CustomModel(region_name, "emulator", logical_id, logical_id)
    resource.set_data({})
    resource.cf_resource_type, resource.logical_resource_id = resource_json["Type"], logical_id
    return resource


def _find_parent(logical_id, resource_json, resources_map, region_name):
    """Custom::ParentImage in-process: the Lambda's own resolve(), with an EC2 client on the emulator."""
    import boto3
    from moto.cloudformation import parsing
    from moto.cloudformation.custom_model import CustomModel

    from workloads.commands.dlami import resolve

    props = parsing.clean_json(resource_json.get("Properties", {}), resources_map)
    ec2 = boto3.client("ec2", region_name=region_name, endpoint_url=_ENDPOINT[-1], aws_access_key_id="testing",
                       aws_secret_access_key="testing")
    image, reason = resolve(ec2, props["Query"], props.get("Marker") or None, region_name)
    if reason:
        raise CustomResourceFailed(logical_id, resource_json["Type"], reason)
    resource = CustomModel(region_name, "emulator", logical_id, logical_id)
    resource.set_data({"ImageId": image["ImageId"], "Name": image["Name"]})
    resource.cf_resource_type, resource.logical_resource_id = resource_json["Type"], logical_id
    return resource


# What the emulator's placeholder DLAMIs say they are: never mistaken for an AWS image in a log or an output.
PLACEHOLDER_DLAMI = "PLACEHOLDER image of the local emulator, not an AWS DLAMI"


def placeholder_dlamis() -> list[dict]:
    """One Amazon-owned image per pinned parent DLAMI (workloads/catalog/software.yaml), in moto's own AMI format:
    the name the query matches, and on Neuron the release in the description, as the real DLAMIs have them."""
    from workloads.catalog import load_software

    images = []
    for i, stack in enumerate(load_software().stacks):
        release = stack.neuron_release or ""
        says = f" Neuron SDK {release}{'.0' if release.count('.') == 1 else ''}." if release else ""
        images.append({"ami_id": f"ami-0e{i:015x}", "name": stack.parent_dlami_name.rstrip("* ") + " 20260101",
                       "creation_date": "2026-01-01T00:00:00.000Z", "architecture": "x86_64", "public": True,
                       "state": "available", "virtualization_type": "hvm", "root_device_type": "ebs",
                       "root_device_name": "/dev/sda1", "description": PLACEHOLDER_DLAMI + "." + says})
    return images


def _seed_parent_images() -> None:
    """moto loads its public images from a module list when an EC2 backend is made (owner alias amazon)."""
    import moto.ec2.models.amis as amis

    known = {a["ami_id"] for a in amis.AMIS}
    amis.AMIS.extend(i for i in placeholder_dlamis() if i["ami_id"] not in known)


def deploy_command(app_args: Sequence[str], stacks: Sequence[str]) -> str:
    """The `cdk deploy` line a user pastes to deploy to the emulator, complete."""
    import shlex
    return shlex.join(["cdk", "deploy", *stacks, *app_args, *DEPLOY_OPTIONS])


@dataclass
class Emulator:
    endpoint: str
    region: str
    # The CLI locks its output directory (./cdk.out by default): each emulator has its own, so
    # two test workers (or a test and a demo) can run the CLI at the same time.
    cli_output: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="cdk-cli-")))

    def env(self) -> dict[str, str]:
        """Environment for the CDK CLI and boto3: the emulator's endpoint and throwaway credentials."""
        require_local(self.endpoint)
        env = {k: v for k, v in os.environ.items() if k not in _REAL_ACCOUNT_VARS}
        env.update({
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
            "CDK_DISABLE_CLI_TELEMETRY": "true",
            # The SDK checks roles with IAM policy simulation, which the emulator does not implement.
            "SAGEMAKER_VALIDATE_ROLE": "false",
            "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        })
        return env

    @contextmanager
    def in_process(self) -> Iterator[None]:
        """Point this process's boto3 and sagemaker SDK at the emulator for the block."""
        saved = dict(os.environ)
        os.environ.update({k: v for k, v in self.env().items() if k.startswith(("AWS_", "SAGEMAKER_"))})
        try:
            yield
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def client(self, service: str):
        import boto3

        require_local(self.endpoint)
        return boto3.client(service, region_name=self.region, endpoint_url=self.endpoint,
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def cdk(self, *args: str, timeout: float = 300, quiet: bool = False,
            cwd: Path = ROOT) -> subprocess.CompletedProcess:
        """Run the project's pinned CDK CLI against the emulator (never interactive); `cwd` where it looks for
        cdk.json."""
        cmd = [str(CDK), *args, "--no-notices", "--output", str(self.cli_output)]
        return subprocess.run(cmd, cwd=cwd, env=self.env(), timeout=timeout, check=True, text=True,
                              capture_output=quiet)

    def account(self) -> str:
        return self.client("sts").get_caller_identity()["Account"]

    def bootstrap(self, *, quiet: bool = False) -> None:
        """`cdk bootstrap aws://ACCOUNT/REGION`, run outside the project: with an app in ./cdk.json the CLI
        synthesizes it first (a whole synthesis, 10-20 s here, for an environment named on the command line)."""
        self.cdk("bootstrap", f"aws://{self.account()}/{self.region}", quiet=quiet, cwd=self.cli_output)

    def deploy(self, *app_args: str, stacks: tuple[str, ...] = ("--all",), quiet: bool = False) -> None:
        self.cdk("deploy", *stacks, *DEPLOY_OPTIONS, *app_args, quiet=quiet)

    def destroy(self, *app_args: str, stacks: tuple[str, ...], quiet: bool = False) -> None:
        """`cdk destroy STACK`: the stack and every stack that depends on it, dependents first (never interactive)."""
        self.cdk("destroy", *stacks, "--force", *app_args, quiet=quiet)

    def deploy_estate(self, *app_args: str, plan, stage: str = "", shared: str = "", quiet: bool = False,
                      say=lambda line: None) -> list[str]:
        """Deploy in the real order: every stack but the InferenceStack, then a placeholder at each artifact key
        the plan serves (the emulator runs no container), then the rest, whose artifact check now passes.
        `stage`: a team's stage (its stacks are STAGE/*); `shared`: the account's shared stack it reads, outside the
        stage (StampedTeam.shared_stack), deployed first. The keys given a placeholder."""
        from workloads.commands.jobs import stack_outputs

        from .placeholder_artifacts import upload_placeholders

        # A team's MlUsersStack names its models' roles by their IAM path, so it deploys before the InferenceStack.
        first = (*((TEAM_STACKS[0],) if stage else ()), *BEFORE_INFERENCE, *((TEAM_STACKS[1],) if stage else ()))
        if stage:  # the shared stack is outside the stage, which builds no JobLogsStack of its own
            first = tuple(f"{stage}/{s}" for s in first if s != "JobLogsStack")
            self.deploy(*app_args, stacks=(shared,), quiet=quiet)
        self.deploy(*app_args, stacks=first, quiet=quiet)
        bucket = stack_outputs(plan, ("DataStack",), stage=stage,
                               cloudformation=self.client("cloudformation"))["DatasetBucketName"]
        keys = upload_placeholders(self.client("s3"), bucket, plan)
        if keys:
            say(f"Uploaded a PLACEHOLDER model artifact to s3://{bucket}/: {', '.join(keys)} (the emulator runs no "
                "container; on AWS, train or upload the real model here before deploying the InferenceStack)")
        if plan.inference:
            # The assembly the first deploy synthesized (same app, same context): a second synthesis would only
            # write it again.
            again = app_args if "--app" in app_args else ("--app", str(self.cli_output))
            self.deploy(*again, stacks=(f"{stage}/*",) if stage else ("--all",), quiet=quiet)
        return keys


@contextmanager
def running(region: str) -> Iterator[Emulator]:
    """A moto server on localhost for the duration of the block."""
    from moto.server import ThreadedMotoServer

    _patch_moto()
    # We report skipped types ourselves (deployed_resources); moto's per-resource chatter is noise.
    logging.getLogger("moto").setLevel(logging.ERROR)
    # A call moto has not implemented (the SageMaker SDK's IAM policy simulation) is answered 500, which the client
    # reports; werkzeug's own traceback of it would only confuse the user of `make emulator`.
    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore", message="Tried to parse .* but it's not supported by moto")
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    # moto keeps its state per process: every emulator starts empty (the emulator is create-only).
    from moto.moto_api._internal.models import moto_api_backend

    moto_api_backend.reset()
    emulator = Emulator(endpoint=f"http://localhost:{port}", region=region)
    _ENDPOINT.append(emulator.endpoint)
    try:
        yield emulator
    finally:
        _ENDPOINT.remove(emulator.endpoint)
        server.stop()
        shutil.rmtree(emulator.cli_output, ignore_errors=True)


@dataclass(frozen=True)
class StackReport:
    name: str
    status: str
    outputs: dict[str, str]
    created: dict[str, str]  # logical ID -> type
    skipped: dict[str, str]  # in the template, not created by the emulator


def deployed_resources(emulator: Emulator, assembly: Path) -> list[StackReport]:
    """What the emulator created for each stack of a cloud assembly, and what it skipped."""
    cf = emulator.client("cloudformation")
    manifest = json.loads((assembly / "manifest.json").read_text())
    reports = []
    for artifact_id, artifact in manifest["artifacts"].items():
        if artifact["type"] == "cdk:cloud-assembly":  # a Stage (one team): its stacks live in a nested assembly
            nested = assembly / artifact["properties"]["directoryName"]
            reports += [r for r in deployed_resources(emulator, nested) if r.status != "NOT_DEPLOYED"]
            continue
        if artifact["type"] != "aws:cloudformation:stack":
            continue
        name = artifact.get("displayName") or artifact_id
        stack_name = artifact["properties"].get("stackName", artifact_id)
        template = json.loads((assembly / artifact["properties"]["templateFile"]).read_text())
        region = artifact.get("environment", "").rsplit("/", 1)[-1]
        elsewhere = region not in ("", "unknown-region", emulator.region)  # the same stack name in another region
        if elsewhere or not any(s["StackName"] == stack_name for s in cf.list_stacks()["StackSummaries"]):
            reports.append(StackReport(name, "NOT_DEPLOYED", {}, {}, {}))
            continue
        wanted = {lid: r["Type"] for lid, r in template.get("Resources", {}).items() if r["Type"] != "AWS::CDK::Metadata"}
        created = {}
        for page in cf.get_paginator("list_stack_resources").paginate(StackName=stack_name):
            for row in page["StackResourceSummaries"]:
                if row.get("LogicalResourceId") in wanted:  # moto lists skipped resources as blank rows
                    created[row["LogicalResourceId"]] = row["ResourceType"]
        stack = cf.describe_stacks(StackName=stack_name)["Stacks"][0]
        reports.append(StackReport(
            name=name, status=stack["StackStatus"],
            outputs={o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])},
            created=created, skipped={lid: t for lid, t in wanted.items() if lid not in created},
        ))
    return reports
