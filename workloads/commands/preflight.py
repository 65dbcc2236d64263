"""`python -m workloads preflight WORKLOAD`: the account as it is, checked against the plan before `cdk deploy`.

Synthesis never looks at the account; a deploy then meets it as it is: zones mapped per account, instance types not
offered in a zone, quotas a default account lacks, a capacity reservation that is elsewhere or over, a missing CDK
bootstrap, a tag Billing does not see, a pinned image that is not published in the region. Each rule below is one small
function of the plan and the account, registered with the page of the AWS API or guide it relies on and the read-only
IAM actions it calls; `preflight` runs them all and returns every finding at once, with ParallelCluster's severities:
an ERROR is what the deploy as planned cannot get past in this account, a WARNING is what it would go on with but
should not, an INFO says what was found. boto3 is imported here only, never on the planner's path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import Any

from ..catalog import load_catalog
from ..errors import ERROR, INFO, WARNING, Finding
from ..packaged import read_packaged_yaml
from ..planning.launches import EC2, Launch, launches
from ..planning.planner import Plan
from .dlami import resolve

# A Capacity Block that ends sooner than this (or than the plan's likely training hours) gets a WARNING.
SOON_HOURS = 24
# Errors that say the caller may not make the call: the rule is reported as not checked, the others still run.
DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedException"}
# HeadObject's answers for an object that is not there, and for one the caller may not see (S3 API Reference,
# HeadObject: without s3:ListBucket a missing key answers 403).
MISSING, UNREADABLE = {"404", "NoSuchKey", "NotFound"}, {"403", "AccessDenied", "Forbidden"}


@cache
def account_facts() -> dict:
    """workloads/catalog/account.yaml: quota codes and names, the CDK bootstrap versions, with their sources."""
    return read_packaged_yaml(Path(__file__).parent.parent / "catalog" / "account.yaml")


class Account:
    """The caller's AWS account in the plan's region: one boto3 client per service, made on first use (tests pass
    their own), the zone map read once, and the time the checks compare windows with."""

    def __init__(self, region: str, *, stage: str = "", now: datetime | None = None, clients: dict | None = None,
                 session: Any = None) -> None:
        self.region, self.stage = region, stage
        self.now = now or datetime.now(timezone.utc)
        self._clients = dict(clients or {})
        self._session = session
        self._zones: dict[str, str] | None = None

    def client(self, service: str):
        if service not in self._clients:
            import boto3

            self._session = self._session or boto3.session.Session()
            self._clients[service] = self._session.client(service, region_name=self.region)
        return self._clients[service]

    @property
    def zones(self) -> dict[str, str]:
        """AZ ID -> the name this account gives it (DescribeAvailabilityZones answers per account)."""
        if self._zones is None:
            found = self.client("ec2").describe_availability_zones()["AvailabilityZones"]
            self._zones = {z["ZoneId"]: z["ZoneName"] for z in found
                           if z.get("ZoneType", "availability-zone") == "availability-zone"}
        return self._zones

    def zone_id(self, zone: str) -> str | None:
        """The AZ ID of a zone written either way, or None when this account has no such zone."""
        if zone in self.zones:
            return zone
        return next((zid for zid, name in self.zones.items() if name == zone), None)

    def named(self, zone_id: str) -> str:
        return f"{zone_id} ({self.zones.get(zone_id, '?')} in this account)"


@dataclass(frozen=True)
class Rule:
    name: str
    check: Callable[[Plan, Account], list[Finding]]
    source: str  # the AWS page the rule relies on: "title <url>"
    actions: tuple[str, ...]  # the read-only IAM actions it calls (docs/operations.md lists their union)


RULES: list[Rule] = []


def rule(title: str, url: str, *actions: str) -> Callable:
    """Register a rule with its source and the IAM actions it needs."""
    def register(fn: Callable[[Plan, Account], list[Finding]]) -> Callable:
        RULES.append(Rule(fn.__name__, fn, f"{title} <{url}>", actions))
        return fn
    return register


def preflight(plan: Plan, account: Account) -> list[Finding]:
    """Every rule's findings, ERRORs first. An AWS refusal of one rule's calls is a WARNING that it was not checked;
    no credentials, or no way to reach AWS, stops the run (the caller says nothing was sent)."""
    from botocore.exceptions import ClientError

    findings: list[Finding] = []
    for r in RULES:
        try:
            found = r.check(plan, account)
        except ClientError as exc:
            found = [_not_checked(r, exc)]
        findings += [f if f.source else replace(f, source=r.source) for f in found]
    order = {ERROR: 0, WARNING: 1, INFO: 2}
    return sorted(findings, key=lambda f: order[f.level])


def _not_checked(r: Rule, exc) -> Finding:
    """A refused rule's WARNING, one line: a denial names the actions the check needs; a service failure (HTTP 5xx,
    or an HTML page where an API answer belongs: a local emulator that lacks the API) says so, without the page."""
    error = exc.response.get("Error", {})
    http = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
    message = str(error.get("Message", exc))
    if http >= 500 or message.lstrip().lower().startswith(("<!doctype", "<html")):
        # The value is the answer's status, said as one: a bare 500 in the value column read as the quota's value.
        return Finding(WARNING, r.name, f"HTTP {http}" if http else error.get("Code"),
                       f"not checked: the service failed (HTTP {http}), so this says nothing about the account; a "
                       f"local emulator answers so where it lacks {', '.join(r.actions)}")
    why = "the caller may not call it" if error.get("Code") in DENIED else "AWS refused the request"
    return Finding(WARNING, r.name, error.get("Code"), f"not checked: {why} ({message}); "
                   f"the check needs {', '.join(r.actions)}")


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


# --- zones ------------------------------------------------------------------------------------------------------------

@rule("Amazon EC2 API Reference, DescribeAvailabilityZones",
      "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeAvailabilityZones.html",
      "ec2:DescribeAvailabilityZones")
def zones_exist(plan: Plan, account: Account) -> list[Finding]:
    """Both zones are zones of this account, and which physical zone (AZ ID) each name is here."""
    out = []
    for field, zone in zip(("availability_zone", "second_availability_zone"), plan.hosting_zones):
        zid = account.zone_id(zone)
        if zid is None:
            known = ", ".join(f"{name} ({z})" for z, name in sorted(account.zones.items(), key=lambda i: i[1]))
            out.append(Finding(ERROR, field, zone, f"not a zone of {account.region} in this account; its zones: "
                               f"{known}"))
        elif zid == zone:
            out.append(Finding(INFO, field, zone, f"is {account.zones[zid]} in this account"))
        else:
            out.append(Finding(INFO, field, zone, f"is {zid} in this account (names map to physical zones per "
                               f"account; write {zid} to pin the physical zone)"))
    return out


@rule("Amazon EC2 API Reference, DescribeInstanceTypeOfferings",
      "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypeOfferings.html",
      "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeAvailabilityZones")
def types_offered_in_zone(plan: Plan, account: Account) -> list[Finding]:
    """Every EC2 instance the estate launches in the cluster's zone is offered there (by AZ ID: the same physical zone
    whatever this account calls it)."""
    zone = plan.workload.availability_zone
    zid = account.zone_id(zone)
    wanted = [l for l in launches(plan) if l.usage == EC2 and l.in_zone]
    if zid is None or not wanted:
        return []  # zones_exist reports a zone the account does not have
    pages = account.client("ec2").get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone-id",
        Filters=[{"Name": "instance-type", "Values": sorted({l.instance_type for l in wanted})}])
    offered: dict[str, set[str]] = {}
    for page in pages:
        for o in page["InstanceTypeOfferings"]:
            offered.setdefault(o["InstanceType"], set()).add(o["Location"])
    out = []
    for l in wanted:
        where = offered.get(l.instance_type, set())
        if zid in where:
            out.append(Finding(INFO, "availability_zone", zone, f"offers {l.instance_type} ({l.what})"))
            continue
        others = ", ".join(account.named(z) for z in sorted(where))
        fix = f"set availability_zone to one of {others}" if where else \
            f"{l.instance_type} is offered in no zone of {account.region}: choose another type or region"
        out.append(Finding(ERROR, "availability_zone", zone, f"{account.named(zid)} does not offer {l.instance_type} "
                           f"({l.what}), so they never launch; {fix}"))
    return out


# --- quotas -----------------------------------------------------------------------------------------------------------

def ec2_quota_of(instance_type: str) -> dict:
    """The Running On-Demand quota that counts this type's vCPUs (account.yaml), by the family letters of its name."""
    family = "".join(c for c in instance_type.split(".")[0].split("-")[0] if c.isalpha())
    quotas = account_facts()["ec2_vcpu_quotas"]
    for candidate in (family, family[:1]):  # trn2: "trn"; im4gn: "im", then the Standard class's "i"
        found = next((q for q in quotas if candidate in q["families"]), None)
        if found:
            return found
    raise KeyError(f"no Running On-Demand quota recorded for {instance_type} (workloads/catalog/account.yaml)")


def _increase(service: str, code: str, desired: float, region: str) -> str:
    return (f"aws service-quotas request-service-quota-increase --region {region} --service-code {service} "
            f"--quota-code {code} --desired-value {desired:g}")


@rule("Service Quotas API Reference, GetServiceQuota",
      "https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_GetServiceQuota.html",
      "servicequotas:GetServiceQuota", "servicequotas:GetAWSDefaultServiceQuota")
def ec2_vcpu_quotas(plan: Plan, account: Account) -> list[Finding]:
    """The On-Demand vCPUs the estate's EC2 instances need, per family class, against the applied quota."""
    cat, out = load_catalog(), []
    needs: dict[str, list[Launch]] = {}
    for l in launches(plan):
        if l.usage != EC2:
            continue
        if l.reserved:
            out.append(Finding(INFO, l.field, l.instance_type, f"{l.what} launch into {l.reserved}: the reservation's "
                               "instance count holds them (training.capacity_reservation_id is checked instead)"))
            continue
        needs.setdefault(ec2_quota_of(l.instance_type)["code"], []).append(l)
    sq = account.client("service-quotas")
    for code, group in needs.items():
        facts = next(q for q in account_facts()["ec2_vcpu_quotas"] if q["code"] == code)
        try:
            quota = sq.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]
        except Exception as exc:
            if _code(exc) != "NoSuchResourceException":
                raise
            quota = sq.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]
        need = sum(l.count * cat.get(l.instance_type).vcpus for l in group)
        what = "; ".join(f"{l.count} x {l.instance_type} ({cat.get(l.instance_type).vcpus} vCPUs each, {l.what})"
                         for l in group)
        field = f"{facts['name']} ({code})"
        if quota.get("QuotaName") and quota["QuotaName"] != facts["name"]:
            out.append(Finding(WARNING, field, quota["QuotaName"], "the quota code answers with another name than "
                               "workloads/catalog/account.yaml records: check the code"))
        if need > quota["Value"]:
            out.append(Finding(ERROR, field, quota["Value"], f"the plan runs {what}: {need} vCPUs, over the applied "
                               f"quota; request an increase: {_increase('ec2', code, need, account.region)}"))
        else:
            out.append(Finding(INFO, field, quota["Value"], f"the plan runs {what}: {need} vCPUs (instances already "
                               "running count against the same quota)"))
    return out


def sagemaker_needs(plan: Plan) -> dict[str, tuple[int, list[str]]]:
    """Quota name -> (instances or concurrency needed, what needs them), for the plan's SageMaker usage."""
    facts, needs = account_facts(), {}
    for l in launches(plan):
        if l.usage == EC2 or l.reserved:
            continue
        name = facts["sagemaker_quota_name"].format(instance_type=l.instance_type, usage=l.usage)
        count, what = needs.get(name, (0, []))
        needs[name] = (count + l.count, [*what, f"{l.count} for {l.what}"])
    serverless = plan.inference.get("serverless")
    if serverless is not None and serverless.max_concurrency:
        needs[facts["sagemaker_serverless_concurrency"]] = (serverless.max_concurrency,
                                                           ["inference.serverless.max_concurrency"])
    return needs


def _quotas_by_name(client, operation: str, names: set[str]) -> dict[str, dict]:
    found = {}
    for page in client.get_paginator(operation).paginate(ServiceCode="sagemaker"):
        found.update({q["QuotaName"]: q for q in page["Quotas"] if q["QuotaName"] in names})
        if names <= set(found):
            break
    return found


@rule("Service Quotas API Reference, ListServiceQuotas",
      "https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_ListServiceQuotas.html",
      "servicequotas:ListServiceQuotas", "servicequotas:ListAWSDefaultServiceQuotas")
def sagemaker_quotas(plan: Plan, account: Account) -> list[Finding]:
    """SageMaker endpoint, transform job, training job, cluster and notebook instances per type (and serverless
    concurrency) against the applied quotas, found by name: the codes differ per instance type."""
    needs = sagemaker_needs(plan)
    if not needs:
        return []
    sq = account.client("service-quotas")
    quotas = _quotas_by_name(sq, "list_service_quotas", set(needs))
    # ListServiceQuotas leaves out quotas with no applied value: those are at their default.
    missing = set(needs) - set(quotas)
    if missing:
        quotas.update(_quotas_by_name(sq, "list_aws_default_service_quotas", missing))
    out = []
    for name, (need, what) in needs.items():
        quota = quotas.get(name)
        if quota is None:
            # Neither applied nor default: the region has no such quota, so SageMaker does not offer the type there
            # for this use and every create call would fail.
            out.append(Finding(ERROR, name, None, f"no SageMaker quota of this name in {account.region}: SageMaker "
                               f"does not offer the type here for this use ({'; '.join(what)}); plan another type "
                               "or region"))
        elif need > quota["Value"]:
            code = quota.get("QuotaCode", "<its code in the Service Quotas console>")
            out.append(Finding(ERROR, name, quota["Value"], f"the plan needs {need} ({'; '.join(what)}); request an "
                               f"increase: {_increase('sagemaker', code, need, account.region)}"))
        else:
            out.append(Finding(INFO, name, quota["Value"], f"the plan needs {need} ({'; '.join(what)})"))
    return out


# --- capacity ---------------------------------------------------------------------------------------------------------

def _hours_until(when: datetime, now: datetime) -> float:
    return (when - now).total_seconds() / 3600


@rule("Amazon EC2 API Reference, DescribeCapacityReservations",
      "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeCapacityReservations.html",
      "ec2:DescribeCapacityReservations", "ec2:DescribeAvailabilityZones")
def capacity_reservation(plan: Plan, account: Account) -> list[Finding]:
    """The named capacity reservation or Capacity Block exists, is in the cluster's zone, of the planned type and
    kind, holds the nodes, and (a block) its window is open or still to come."""
    t, w = plan.training, plan.workload
    cr_id = t.capacity_reservation_id
    if not cr_id:
        return []
    field = "training.capacity_reservation_id"
    try:
        found = account.client("ec2").describe_capacity_reservations(CapacityReservationIds=[cr_id])
    except Exception as exc:
        if not _code(exc).startswith("InvalidCapacityReservationId"):
            raise
        return [Finding(ERROR, field, cr_id, f"no such capacity reservation in {account.region} for this account "
                        "(describe-capacity-reservations); buy the Capacity Block or create the reservation first")]
    cr = found["CapacityReservations"][0]
    kind = "Capacity Block" if cr.get("ReservationType") == "capacity-block" else "capacity reservation"
    out = []
    zid = account.zone_id(w.availability_zone)
    if zid and cr.get("AvailabilityZoneId") and cr["AvailabilityZoneId"] != zid:
        there = cr["AvailabilityZoneId"]
        out.append(Finding(ERROR, field, cr_id, f"the {kind} is in {account.named(there)}; the cluster's zone is "
                           f"{account.named(zid)}: set availability_zone and capacity_reservation_az to "
                           f"{account.zones.get(there, there)} (or {there}, with second_availability_zone as an AZ ID)"))
    if cr["InstanceType"] != t.instance_type:
        out.append(Finding(ERROR, field, cr_id, f"the {kind} holds {cr['InstanceType']}; the plan launches "
                           f"{t.instance_type}: set training.instance_type to {cr['InstanceType']}"))
    if cr["TotalInstanceCount"] < t.instance_count:
        out.append(Finding(ERROR, field, cr_id, f"the {kind} holds {cr['TotalInstanceCount']} instances; the plan "
                           f"launches {t.instance_count}: set training.instance_count to at most "
                           f"{cr['TotalInstanceCount']}, or reserve more"))
    if (cr.get("ReservationType") == "capacity-block") != t.capacity_block:
        out.append(Finding(ERROR, field, cr_id, f"it is a {kind}; training.capacity_block is "
                           f"{str(t.capacity_block).lower()}: the launch template's market type must match it"))
    out += _window(cr, kind, field, plan, account.now)
    return out or [Finding(INFO, field, cr_id, f"a {kind} of {cr['TotalInstanceCount']} x {cr['InstanceType']} in "
                           f"{account.named(cr['AvailabilityZoneId'])}, {cr['State']}")]


def _window(cr: dict, kind: str, field: str, plan: Plan, now: datetime) -> list[Finding]:
    state, start, end = cr["State"], cr.get("StartDate"), cr.get("EndDate")
    if state in ("expired", "cancelled", "failed", "payment-failed", "unsupported"):
        return [Finding(ERROR, field, cr["CapacityReservationId"], f"the {kind} is {state}: nothing launches into it")]
    if state in ("scheduled", "payment-pending", "pending", "assessing", "delayed") or (start and start > now):
        when = f" at {start:%Y-%m-%d %H:%M} UTC, in {_hours_until(start, now):.0f} h" if start else ""
        return [Finding(WARNING, field, cr["CapacityReservationId"], f"the {kind} is {state} and starts{when}: the "
                        "compute nodes wait until then")]
    hours = plan.training.estimate.hours or SOON_HOURS
    if end and _hours_until(end, now) < max(hours, SOON_HOURS):
        return [Finding(WARNING, field, cr["CapacityReservationId"], f"the {kind} ends at {end:%Y-%m-%d %H:%M} UTC, "
                        f"in {_hours_until(end, now):.0f} h; the plan's training run takes about {hours:.0f} h: its "
                        "instances stop when the block ends (checkpoint, or extend the block)")]
    return []


# --- what the stacks read -----------------------------------------------------------------------------------------

@rule("Amazon S3 API Reference, HeadObject", "https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html",
      "cloudformation:DescribeStacks", "s3:GetObject", "s3:ListBucket")
def served_artifacts(plan: Plan, account: Account) -> list[Finding]:
    """The model artifacts the InferenceStack serves are in the dataset bucket (its deploy-time check refuses
    otherwise); before the DataStack exists there is no bucket to look in."""
    from ..planning.artifacts import artifact_checks
    from .jobs import EstateNotDeployed, stack_outputs

    if not plan.inference:
        return []
    try:
        outputs = stack_outputs(plan, ("DataStack",), stage=account.stage,
                                cloudformation=account.client("cloudformation"))
    except EstateNotDeployed as exc:
        return [Finding(INFO, "DataStack", None, f"{exc}: the served artifacts are checked once it exists")]
    bucket = outputs["DatasetBucketName"]
    target = plan.workload.name + (f" --stage {account.stage}" if account.stage else "")
    s3, out = account.client("s3"), []
    for check in artifact_checks(plan.training, plan.inference, workload=target):
        where = f"s3://{bucket}/{check.key}"
        try:
            s3.head_object(Bucket=bucket, Key=check.key)
        except Exception as exc:
            code = _code(exc)
            if code not in MISSING and code not in UNREADABLE:
                raise
            why = "missing" if code in MISSING else ("not readable with these credentials (HeadObject answers 403 "
                                                      "for a missing key without s3:ListBucket)")
            out.append(Finding(WARNING, "artifact", where, f"{why}: `cdk deploy InferenceStack` refuses until it is "
                               f"there ({', '.join(check.kinds)} read {check.artifact}); {check.put_in(bucket)}"))
            continue
        out.append(Finding(INFO, "artifact", where, f"uploaded ({', '.join(check.kinds)})"))
    return out


@rule("AWS CDK v2 Developer Guide, cdk bootstrap", "https://docs.aws.amazon.com/cdk/v2/guide/ref-cli-cmd-bootstrap.html",
      "cloudformation:DescribeStacks", "sts:GetCallerIdentity")
def cdk_bootstrap(plan: Plan, account: Account) -> list[Finding]:
    """The CDK bootstrap stack is there, in a usable state, and new enough for the templates (and the pinned CLI)."""
    boot = account_facts()["bootstrap"]
    name = boot["stack"]
    try:
        stack = account.client("cloudformation").describe_stacks(StackName=name)["Stacks"][0]
    except Exception as exc:
        if _code(exc) != "ValidationError":
            raise
        who = account.client("sts").get_caller_identity()["Account"]
        return [Finding(ERROR, name, None, f"no CDK bootstrap stack in {account.region}: run cdk bootstrap "
                        f"aws://{who}/{account.region}")]
    status = stack["StackStatus"]
    if status.endswith("_FAILED") or status in ("ROLLBACK_COMPLETE", "DELETE_COMPLETE", "REVIEW_IN_PROGRESS"):
        return [Finding(ERROR, name, status, "the bootstrap stack is not usable: delete it if it never completed, "
                        "then run cdk bootstrap again")]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    if "BootstrapVersion" not in outputs:  # not an old version: a stack cdk bootstrap did not make, or a copy of one
        return [Finding(ERROR, name, status, "the stack has no BootstrapVersion output, which cdk bootstrap's stack "
                        "always has: it was not made by cdk bootstrap (or was changed since); run cdk bootstrap "
                        f"aws://ACCOUNT/{account.region} to replace it")]
    version = int(outputs["BootstrapVersion"])
    if version < boot["templates_require"]:
        return [Finding(ERROR, name, version, f"the templates require bootstrap version {boot['templates_require']} "
                        "or newer: run cdk bootstrap (the pinned CLI upgrades it)")]
    if version < boot["cli_template"]:
        return [Finding(INFO, name, version, f"new enough for these templates ({boot['templates_require']}+); the "
                        f"pinned CLI {boot['cli']} bootstraps version {boot['cli_template']} (cdk bootstrap upgrades)")]
    return [Finding(INFO, name, version, f"bootstrap version {version}, {status}")]


# --- billing and images -----------------------------------------------------------------------------------------------

@rule("AWS Billing and Cost Management API Reference, ListCostAllocationTags",
      "https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_ListCostAllocationTags.html",
      "ce:ListCostAllocationTags")
def cost_allocation_tags(plan: Plan, account: Account) -> list[Finding]:
    """The tags the estate is costed by (`workload`; a team's `team`, which its budget filters on) are active cost
    allocation tags: Billing, Cost Explorer and budgets see no other tags."""
    keys = ["workload", *(["team"] if account.stage else [])]
    answer = account.client("ce").list_cost_allocation_tags(TagKeys=keys, Type="UserDefined")
    status = {t["TagKey"]: t["Status"] for t in answer.get("CostAllocationTags", [])}
    source = account_facts()["sources"]["user-defined-cost-allocation-tags"]
    how = ("activate it in the management (payer) account, or a standalone account: Billing and Cost Management "
           "console, Cost allocation tags, or aws ce update-cost-allocation-tags-status --cost-allocation-tags-status "
           "TagKey={key},Status=Active")
    out = []
    for key in keys:
        used = "the team's budget filters on it" if key == "team" else "cost reports split the estate by it"
        if status.get(key) == "Active":
            out.append(Finding(INFO, "cost allocation tag", key, "active"))
        elif key in status:
            out.append(Finding(WARNING, "cost allocation tag", key, f"inactive, so {used} in vain; {how.format(key=key)}",
                               f"{source['title']} <{source['url']}>"))
        else:
            out.append(Finding(WARNING, "cost allocation tag", key, "not known to Billing yet (a key appears up to a day "
                               f"after a tagged resource is created) and not active, so {used} in vain; once it "
                               f"appears, {how.format(key=key)}", f"{source['title']} <{source['url']}>"))
    return out


@rule("AWS Neuron docs, Neuron DLAMI User Guide, Finding a DLAMI for a specific Neuron SDK version",
      "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/deploy/environments/dlami.html", "ec2:DescribeImages")
def neuron_dlami_release(plan: Plan, account: Account) -> list[Finding]:
    """The node image's parent, the DLAMI of the pinned Neuron release, is published in the region."""
    t = plan.training
    software = t.software
    if not (software and software.neuron_release and t.orchestrator == "slurm"):
        return []  # not a Neuron stack the node image bakes (HyperPod brings its own AMI)
    query = software.parent_dlami_query()
    # The deploy-time custom resource's own rule (workloads/commands/dlami.py): what preflight finds is what it will bake on.
    image, reason = resolve(account.client("ec2"), query, software.release_marker, account.region)
    if image:
        return [Finding(INFO, "neuron_release", software.neuron_release, f"{image['ImageId']} ({image['Name']}) is "
                        f"the node image's parent in {account.region}")]
    return [Finding(ERROR, "neuron_release", software.neuron_release, reason)]


def required_actions() -> list[str]:
    """Every IAM action preflight calls: the read-only policy it needs (docs/operations.md lists it)."""
    return sorted({a for r in RULES for a in r.actions})

