"""Issue 31, a clean lifecycle, as rules over every synthesized template: what each kind of stateful resource does
when its stack is deleted and when the create that made it fails (constructs_lib/lifecycle.py), that no kept log
group has a name a retry would meet, that nothing kept holds what a later stack's deletion needs, and the logical
IDs of what is kept. tests/test_teardown.py deploys and deletes an estate in the emulator."""

from __future__ import annotations

import json

import pytest
from cfnlint.data import AdditionalSpecs
from cfnlint.helpers import load_resource

from tools.emulator import imported
from workloads.planning.monitoring import metric_facts

from .conftest import VARIANTS

KEPT = ("RetainExceptOnCreate", "Retain")  # (DeletionPolicy, UpdateReplacePolicy)
KEPT_EVEN_IF_CREATE_FAILS = ("Retain", "Retain")
DELETED = ("Delete", "Delete")
# The stateful kinds are cfn-lint's list (its StatefulResources.json), plus what belongs to one of them. A kind in
# that list that the estate starts to use, and that has no line here, fails the rule below.
STATEFUL = set(load_resource(AdditionalSpecs, "StatefulResources.json")["ResourceTypes"]) | {
    "AWS::FSx::DataRepositoryAssociation", "AWS::S3::BucketPolicy"}
POLICY = {
    "AWS::S3::Bucket": KEPT,
    "AWS::S3::BucketPolicy": KEPT,  # a kept bucket stays TLS-only and keeps taking access logs
    "AWS::KMS::Key": KEPT,
    "AWS::EFS::FileSystem": KEPT,  # the users' homes; its mount targets, in NetworkStack's subnet, are deleted
    "AWS::Logs::LogGroup": KEPT,
    "AWS::FSx::FileSystem": DELETED,  # a cache of the kept bucket, in NetworkStack's subnet (lustre.py)
    "AWS::FSx::DataRepositoryAssociation": DELETED,
}
# Where endpoint and inference component containers write (metrics.yaml container_logs): the group's name, less it.
ENDPOINT_LOGS = tuple(sorted({row["group"].rsplit("{", 1)[0] for row in metric_facts()["container_logs"].values()}))
# Resources a kept resource must not name: a resource placed in them holds network interfaces there, and AWS
# refuses to delete a subnet, security group or VPC that an interface uses (DependencyViolation).
NETWORK_PLACES = {"AWS::EC2::Subnet", "AWS::EC2::SecurityGroup", "AWS::EC2::VPC"}
# Kinds whose physical name CloudFormation generates unless this property names it: a log group named after one
# gets a new name whenever that resource is created again.
GENERATED_NAME = {"AWS::Lambda::Function": "FunctionName", "AWS::IAM::Role": "RoleName"}
# Kept resources of data (and the keys that read it): a new logical ID would make a second one and orphan the first.
KEPT_LOGICAL_IDS = {
    "DataStack": {"DataKey2A0DE9E6", "DatasetsAccessLogs72037CA6", "DatasetsDataset6D2CC711",
                  "DatasetsAccessLogsPolicyBA2C2A2E", "DatasetsDatasetPolicy8EE55CFC"},
    "NetworkStack": {"LogsKeyFE4C4A83", "AlarmsKey3C2381B3"},
    "JobLogsStack": {"JobLogsKeyCD1E0CF5"},
}
SHARED_HOME = "SharedHomeFileSystem2A2542A7"


def policies(resource: dict) -> tuple[str, str]:
    return resource.get("DeletionPolicy", "Delete"), resource.get("UpdateReplacePolicy", "Delete")


def kept(resource: dict) -> bool:
    return policies(resource)[0] in ("Retain", "RetainExceptOnCreate")


def refs(node) -> set[str]:
    """Logical IDs (and pseudo parameters) a template fragment names with Ref or Fn::GetAtt."""
    if isinstance(node, dict):
        found = {node["Ref"]} if isinstance(node.get("Ref"), str) else set()
        if isinstance(node.get("Fn::GetAtt"), list):
            found.add(node["Fn::GetAtt"][0])
        return found.union(*(refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(refs(v) for v in node))
    return set()


def expected_policy(template: dict, logical_id: str) -> tuple[str, str]:
    """The policy lifecycle.py gives a resource: by kind, with its two exceptions found from the template."""
    resource = template["Resources"][logical_id]
    kind = resource["Type"]
    assert kind in POLICY, f"{logical_id}: {kind} is stateful (cfn-lint) and has no lifecycle rule: add one"
    if kind == "AWS::Logs::LogGroup" and any(prefix in json.dumps(resource["Properties"].get("LogGroupName"))
                                              for prefix in ENDPOINT_LOGS):
        return KEPT_EVEN_IF_CREATE_FAILS  # what a failed endpoint wrote is why it failed
    ensured = [r for r in template["Resources"].values() if r["Type"] == "Custom::AWS" and "CloudWatchLogs" in
               json.dumps(r["Properties"].get("Create"))]
    if kind == "AWS::KMS::Key" and any(logical_id in json.dumps(r["Properties"]) for r in ensured):
        return KEPT_EVEN_IF_CREATE_FAILS  # it encrypts groups no rollback deletes
    return POLICY[kind]


def stateful_violations(templates: dict[str, dict]) -> list[str]:
    out = []
    for stack, template in templates.items():
        for lid, resource in template["Resources"].items():
            if resource["Type"] in STATEFUL:
                if policies(resource) != expected_policy(template, lid):
                    out.append(f"{stack}/{lid} ({resource['Type']}): {policies(resource)}, "
                               f"not {expected_policy(template, lid)}")
            elif kept(resource):
                out.append(f"{stack}/{lid} ({resource['Type']}) is kept, and is no stateful kind")
    return out


def retry_hazards(templates: dict[str, dict]) -> list[str]:
    """Kept log groups whose name a retry, or a stack created again, would find taken: a literal name, or one built
    from nothing that CloudFormation makes anew (the stack's ID, or a generated name)."""
    out = []
    for stack, template in templates.items():
        for lid, resource in template["Resources"].items():
            name = resource.get("Properties", {}).get("LogGroupName")
            if resource["Type"] != "AWS::Logs::LogGroup" or name is None or not kept(resource):
                continue
            fresh = False
            for target in refs(name):
                if target == "AWS::StackId":
                    fresh = True
                elif target in template["Resources"]:
                    named = template["Resources"][target]
                    assert named["Type"] in GENERATED_NAME, f"{stack}/{lid} is named after a {named['Type']}"
                    fresh = fresh or GENERATED_NAME[named["Type"]] not in named.get("Properties", {})
            if not fresh:
                out.append(f"{stack}/{lid}: {json.dumps(name)}")
    return out


def exported(templates: dict[str, dict]) -> dict[str, tuple[str, str]]:
    """Export name -> (stack, logical ID of the resource it names)."""
    out = {}
    for stack, template in templates.items():
        for output in template.get("Outputs", {}).values():
            if isinstance(output.get("Export", {}).get("Name"), str):
                (target,) = refs(output["Value"])
                out[output["Export"]["Name"]] = (stack, target)
    return out


def teardown_blockers(templates: dict[str, dict]) -> list[str]:
    """What a kept resource would hold when the stacks it depends on are deleted after its own (CloudFormation deletes
    a stack only once no other stack imports from it, so those come later): a resource of theirs that is not kept
    itself, or any subnet, security group or VPC (its network interfaces would keep them)."""
    exports = exported(templates)
    out = []
    for stack, template in templates.items():
        for lid, resource in template["Resources"].items():
            if not kept(resource):
                continue
            here = [(stack, t) for t in refs(resource) if t in template["Resources"]]
            there = [exports[name] for name in imported(resource)]
            for owner, target in here + there:
                other = templates[owner]["Resources"][target]
                if other["Type"] in NETWORK_PLACES:
                    out.append(f"{stack}/{lid} is placed in {owner}/{target} ({other['Type']})")
                elif owner != stack and not kept(other):
                    out.append(f"{stack}/{lid} uses {owner}/{target}, deleted before it")
    return out


# ---- the rules, over every variant and the example teams


def test_every_stateful_resource_is_kept_except_when_its_create_fails(variant_synth):
    name, s = variant_synth
    assert not stateful_violations(s.templates), (name, stateful_violations(s.templates))


def test_no_kept_log_group_has_a_name_a_retry_would_meet(variant_synth):
    name, s = variant_synth
    assert not retry_hazards(s.templates), (name, retry_hazards(s.templates))


def test_nothing_kept_holds_what_a_later_deletion_needs(variant_synth):
    """moto does not model network interfaces (and skips FSx), so this rule is checked on the templates."""
    name, s = variant_synth
    assert not teardown_blockers(s.templates), (name, teardown_blockers(s.templates))


def test_every_team_keeps_by_the_same_rules(teams_synth):
    for team, templates in teams_synth.templates.items():
        for rule in (stateful_violations, retry_hazards, teardown_blockers):
            assert not rule(templates), (team, rule.__name__, rule(templates))


@pytest.mark.parametrize("variant", ["huge", "small", "intermediate", "huge-p5", "huge-shared-home", "huge-hyperpod"])
def test_kept_resources_keep_their_logical_ids(synth, variant):
    s = synth(*VARIANTS[variant])
    for stack, ids in KEPT_LOGICAL_IDS.items():
        resources = s.templates[stack]["Resources"]
        assert ids <= set(resources), (stack, ids - set(resources))
        data = {lid for lid, r in resources.items() if kept(r) and r["Type"] != "AWS::Logs::LogGroup"}
        assert data == ids | ({SHARED_HOME} if stack == "DataStack" and SHARED_HOME in resources else set()), stack
    assert (SHARED_HOME in s.templates["DataStack"]["Resources"]) == (variant == "huge-shared-home")


# ---- the rules catch what they are for (today's main had each of these)


def _template(resources: dict, outputs: dict | None = None) -> dict:
    return {"Resources": resources, **({"Outputs": outputs} if outputs else {})}


def test_the_rules_catch_a_retained_file_system_and_a_fixed_log_group_name():
    group = {"Type": "AWS::Logs::LogGroup", "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain",
             "Properties": {"LogGroupName": "/aws/imagebuilder/huge-TrainStack-node-neuron-bef883382c"}}
    role = {"Type": "AWS::IAM::Role", "Properties": {}}
    named_role = {"Type": "AWS::IAM::Role", "Properties": {"RoleName": "fixed"}}
    by_role = {**group, "Properties": {"LogGroupName": {"Fn::Join": ["", ["/aws/imagebuilder/", {"Ref": "Role"}]]}}}
    assert retry_hazards({"TrainStack": _template({"Bake": group})})
    assert not retry_hazards({"TrainStack": _template({"Bake": by_role, "Role": role})})
    assert retry_hazards({"TrainStack": _template({"Bake": by_role, "Role": named_role})})
    assert stateful_violations({"TrainStack": _template({"Bake": group})})  # Retain on create, too

    subnet = {"Type": "AWS::EC2::Subnet", "Properties": {}}
    network = _template({"Subnet": subnet}, {"S": {"Value": {"Ref": "Subnet"}, "Export": {"Name": "net:Subnet"}}})
    fsx = {"Type": "AWS::FSx::FileSystem", "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain",
           "Properties": {"SubnetIds": [{"Fn::ImportValue": "net:Subnet"}]}}
    templates = {"NetworkStack": network, "DataStack": _template({"Fs": fsx})}
    assert teardown_blockers(templates) == ["DataStack/Fs is placed in NetworkStack/Subnet (AWS::EC2::Subnet)"]
    assert stateful_violations(templates)
    fsx.update(DeletionPolicy="Delete", UpdateReplacePolicy="Delete")
    assert not teardown_blockers(templates) and not stateful_violations(templates)
    unknown = {"Type": "AWS::RDS::DBCluster", "DeletionPolicy": "Snapshot", "Properties": {}}
    with pytest.raises(AssertionError, match="has no lifecycle rule"):
        stateful_violations({"DataStack": _template({"Db": unknown})})


# ---- access-log delivery


def test_the_access_log_destination_is_sse_s3_and_every_logged_bucket_logs_there(synth):
    """S3 supports only SSE-S3 default encryption on a server access log destination (Amazon S3 User Guide,
    "Enabling Amazon S3 server access logging"); the data buckets that log there stay SSE-KMS."""
    s = synth(*VARIANTS["huge-hyperpod"])
    destinations = set()
    for stack, template in s.templates.items():
        for lid, bucket in s.resources(stack, "AWS::S3::Bucket").items():
            rule, = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
            logging = bucket["Properties"].get("LoggingConfiguration")
            if logging is None:  # the destination itself
                assert rule["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}, (stack, lid)
                destinations.add((stack, lid))
            else:
                assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms", (stack, lid)
                assert "DatasetsAccessLogs72037CA6" in json.dumps(logging["DestinationBucketName"]), (stack, lid)
    assert destinations == {("DataStack", "DatasetsAccessLogs72037CA6")}
    # No key grants the logging service anything: it writes SSE-S3.
    for stack, template in s.templates.items():
        for key in s.resources(stack, "AWS::KMS::Key").values():
            assert "logging.s3.amazonaws.com" not in json.dumps(key["Properties"]["KeyPolicy"]), stack


def test_no_versioned_bucket_keeps_old_versions_forever(variant_synth):
    """Every versioned bucket of every variant expires its noncurrent versions, and a prefix the cluster rewrites and
    the file system exports deletions of (FSX_LINKS) expires them at its layout.NONCURRENT_DAYS, the shortest rule
    that covers it (S3 honours the shorter of overlapping expirations)."""
    from workloads.planning.layout import FSX_LINKS, NONCURRENT_DAYS

    name, s = variant_synth
    for stack, template in s.templates.items():
        for lid, bucket in s.resources(stack, "AWS::S3::Bucket").items():
            props = bucket["Properties"]
            if props.get("VersioningConfiguration", {}).get("Status") != "Enabled":
                continue
            rules = [r for r in props.get("LifecycleConfiguration", {}).get("Rules", []) if r["Status"] == "Enabled"]
            days = {r.get("Prefix", ""): r["NoncurrentVersionExpiration"]["NoncurrentDays"] for r in rules
                    if "NoncurrentVersionExpiration" in r}
            assert "" in days, f"{name} {stack}/{lid}: no rule expires the bucket's noncurrent versions"
            links = [r for r in template["Resources"].values() if r["Type"] == "AWS::FSx::DataRepositoryAssociation"]
            if lid not in json.dumps(links):
                continue  # not the bucket the file system links
            for _, prefix, _, export in FSX_LINKS:
                if "DELETED" in export:
                    wanted = min(d for p, d in NONCURRENT_DAYS if prefix.startswith(p))
                    kept = min(d for p, d in days.items() if prefix.startswith(p))
                    assert kept == wanted, f"{name} {stack}/{lid}: {prefix} keeps old versions {kept} days"


@pytest.mark.parametrize("variant", ["small-all-kinds", "huge", "intermediate-copies-to-zero", "teams"])
def test_model_containers_use_a_security_group_that_outlives_their_interfaces(synth, teams_synth, variant):
    """Issue 44: SageMaker's network interfaces outlive an endpoint by minutes, so a model security group in the
    InferenceStack failed its deletion (DependencyViolation) and left the stack DELETE_FAILED. Every model in a VPC
    uses NetworkStack's group, which is deleted last; the InferenceStack makes no security group."""
    from .test_runtime_contract import teams_world, world_of

    world = teams_world(teams_synth) if variant == "teams" else world_of(synth(*VARIANTS[variant]))
    models = 0
    for stack in world.stacks.values():
        resources = stack.template["Resources"]
        if stack.name.endswith("InferenceStack"):
            assert not [lid for lid, r in resources.items() if r["Type"] == "AWS::EC2::SecurityGroup"], stack.name
        for lid, r in resources.items():
            vpc = r.get("Properties", {}).get("VpcConfig") if r["Type"] == "AWS::SageMaker::Model" else None
            if not vpc:
                continue
            models += 1
            for group in vpc["SecurityGroupIds"]:
                owner = world.lookup(world.resolve(stack.name, group).removesuffix(".GroupId"))
                assert owner and owner[0].name == stack.name.replace("InferenceStack", "NetworkStack"), \
                    (stack.name, lid, group, owner and owner[0].name)
    assert models
