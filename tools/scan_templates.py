"""`make scan`: four outside scanners over the synthesized templates, each finding either fixed or acknowledged.

    python -m tools.scan_templates                       # synthesize the presets and the example teams file, scan
    python -m tools.scan_templates --assembly cdk.out    # scan assemblies already synthesized

The scanners (pinned in requirements-scan.txt and tools/scan-package.json, installed into .venv-scan by
`make scan-setup`, apart from the project's .venv and node_modules):
- checkov (Bridgecrew/Prisma), its CloudFormation checks;
- cfn-guard 3 with the AWS Guard rules registry's Control Tower rules, both shipped in @cdklabs/cdk-validator-cfnguard;
- cfripper (Skyscanner), with intrinsic functions resolved;
- parliament (Duo Labs) over every identity policy document, its intrinsics resolved here (`_resolve`).

A finding is acknowledged in tools/scan_acks.yaml: scanner, rule, a glob over `STACK/LOGICAL_ID`, and the reason.
Any finding without an acknowledgement is printed, one line each, and the exit status is 1; an acknowledgement that
matches nothing is reported too (a fixed finding's ack goes with it). Not part of `make test`: the four take minutes.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SCAN_BIN = ROOT / ".venv-scan" / "bin"
GUARD = ROOT / ".venv-scan" / "node_modules" / "@cdklabs" / "cdk-validator-cfnguard"
ACKS = Path(__file__).with_name("scan_acks.yaml")
FAKE_ACCOUNT = "123456789012"


@dataclass(frozen=True)
class Finding:
    scanner: str
    rule: str
    where: str  # STACK/LOGICAL_ID
    says: str

    def line(self) -> str:
        return f"{self.scanner} {self.rule} {self.where}: {self.says}"


def templates(assembly: Path) -> Iterator[tuple[str, Path]]:
    """(display name, template file) of every stack in a cloud assembly, nested team stages included."""
    manifest = json.loads((assembly / "manifest.json").read_text())
    for art_id, art in manifest["artifacts"].items():
        if art["type"] == "cdk:cloud-assembly":
            yield from templates(assembly / art["properties"]["directoryName"])
        elif art["type"] == "aws:cloudformation:stack":
            yield art.get("displayName", art_id), assembly / art["properties"]["templateFile"]


def synthesize(outroot: Path) -> list[Path]:
    """The presets and the example teams file, each into its own assembly, as `cdk synth` makes them."""
    out = []
    for name, context in [*((w, {"workload": w}) for w in ("small", "intermediate", "huge")),
                          ("teams", {"teams": str(ROOT / "config" / "teams.yaml")})]:
        outdir = outroot / name
        code = ("import json, sys, aws_cdk as cdk; from stacks.build import build; "
                "from workloads.commands.context import read_context; "
                f"ctx = {{**json.load(open('cdk.json'))['context'], **{context!r}}}; "
                f"app = cdk.App(outdir={str(outdir)!r}, context=ctx); "
                "build(app, read_context(app.node.get_all_context())); app.synth()")
        subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", code], cwd=ROOT, check=True,
                       env={**os.environ, "JSII_NODE": str(ROOT / ".venv" / "bin" / "node")})
        out.append(outdir)
    return out


def checkov(stacks: dict[str, Path]) -> list[Finding]:
    found = []
    for name, path in stacks.items():
        run = subprocess.run([str(SCAN_BIN / "checkov"), "-f", str(path), "--framework", "cloudformation", "-o", "json",
                              "--quiet", "--compact"], capture_output=True, text=True)
        report = json.loads(run.stdout or "{}")
        for result in (report if isinstance(report, list) else [report]):
            for check in result.get("results", {}).get("failed_checks", []):
                found.append(Finding("checkov", check["check_id"], f"{name}/{check['resource'].split('.', 1)[-1]}",
                                     check["check_name"]))
    return found


def cfn_guard(stacks: dict[str, Path]) -> list[Finding]:
    binary = GUARD / "bin" / "ubuntu" / "x86_64" / "cfn-guard"
    found = []
    for name, path in stacks.items():
        run = subprocess.run([str(binary), "validate", "-r", str(GUARD / "rules" / "control-tower" / "cfn-guard"),
                              "-d", str(path), "-o", "json", "-S", "none", "-z"], capture_output=True, text=True)
        for result in json.loads(run.stdout or "[]"):
            for rule in result.get("not_compliant", []):
                text = json.dumps(rule)
                control = re.search(r"\[(CT\.[A-Z0-9.]+)\]", text)
                says = re.search(r"\[CT\.[A-Z0-9.]+\]: ([^\\]+)", text)
                for lid in sorted(set(re.findall(r'"/Resources/([^/"]+)', text))):
                    found.append(Finding("cfn-guard", control.group(1) if control else rule["Rule"]["name"],
                                         f"{name}/{lid}", says.group(1).strip() if says else rule["Rule"]["name"]))
    return found


def cfripper(stacks: dict[str, Path]) -> list[Finding]:
    found = []
    for name, path in stacks.items():
        run = subprocess.run([str(SCAN_BIN / "cfripper"), str(path), "--resolve", "--format", "json",
                              "--aws-account-id", FAKE_ACCOUNT], capture_output=True, text=True)
        start = run.stdout.find('{"exceptions"')
        report = json.loads(run.stdout[start:].splitlines()[0]) if start >= 0 else {"failures": []}
        for f in report["failures"] + [{"rule": "exception", "resource_ids": ["-"], "reason": e}
                                        for e in report.get("exceptions", [])]:
            for lid in f.get("resource_ids") or ["-"]:
                found.append(Finding("cfripper", f["rule"], f"{name}/{lid}", f["reason"]))
    return found


# What a GetAtt's Arn resolves to for parliament, by resource type (others resolve to "*": unchecked, not mismatched).
_ARNS = {"AWS::IAM::Role": "arn:aws:iam::{a}:role/{id}", "AWS::KMS::Key": "arn:aws:kms:{r}:{a}:key/{id}",
         "AWS::S3::Bucket": "arn:aws:s3:::{id}", "AWS::Logs::LogGroup": "arn:aws:logs:{r}:{a}:log-group:{id}:*",
         "AWS::SNS::Topic": "arn:aws:sns:{r}:{a}:{id}", "AWS::SQS::Queue": "arn:aws:sqs:{r}:{a}:{id}",
         "AWS::Lambda::Function": "arn:aws:lambda:{r}:{a}:function:{id}",
         "AWS::StepFunctions::StateMachine": "arn:aws:states:{r}:{a}:stateMachine:{id}",
         "AWS::SageMaker::Model": "arn:aws:sagemaker:{r}:{a}:model/{id}",
         "AWS::SageMaker::Endpoint": "arn:aws:sagemaker:{r}:{a}:endpoint/{id}"}
# Types whose Ref is their ARN (CloudFormation resource reference, each type's "Return values").
_REF_IS_ARN = ("AWS::SNS::Topic", "AWS::StepFunctions::StateMachine", "AWS::SageMaker::Model",
               "AWS::SageMaker::Endpoint")
_PSEUDO = {"AWS::AccountId": FAKE_ACCOUNT, "AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com",
           "AWS::StackName": "stack", "AWS::StackId": "stack-id", "AWS::NoValue": ""}


def _resolve(node, template: dict, region: str):
    """Intrinsics to plain strings, enough for parliament to read a policy: names for Refs, ARNs for GetAtt Arn."""
    resources = template.get("Resources", {})
    if isinstance(node, list):
        return [_resolve(v, template, region) for v in node]
    if not isinstance(node, dict):
        return node
    if "Ref" in node:
        ref = node["Ref"]
        if ref == "AWS::Region":
            return region
        if ref in _PSEUDO:
            return _PSEUDO[ref]
        rtype = resources.get(ref, {}).get("Type", "")
        return _ARNS[rtype].format(r=region, a=FAKE_ACCOUNT, id=ref.lower()) if rtype in _REF_IS_ARN else ref.lower()
    if "Fn::GetAtt" in node:
        lid, attr = node["Fn::GetAtt"] if isinstance(node["Fn::GetAtt"], list) else node["Fn::GetAtt"].split(".", 1)
        rtype = resources.get(lid, {}).get("Type", "")
        return _ARNS[rtype].format(r=region, a=FAKE_ACCOUNT, id=lid.lower()) if attr == "Arn" and rtype in _ARNS \
            else "*"
    if "Fn::Join" in node:
        sep, parts = node["Fn::Join"]
        return sep.join(str(_resolve(p, template, region)) for p in parts)
    if "Fn::Sub" in node:
        text = node["Fn::Sub"] if isinstance(node["Fn::Sub"], str) else node["Fn::Sub"][0]
        return re.sub(r"\$\{([^}]+)\}", lambda m: str(_resolve({"Ref": m.group(1)}, template, region)), text)
    if isinstance(node.get("Fn::ImportValue"), str) and node["Fn::ImportValue"] in _EXPORTS:
        exporter, value = _EXPORTS[node["Fn::ImportValue"]]  # the exporting stack's output, resolved there
        return _resolve(value, exporter, region)
    if "Fn::ImportValue" in node or "Fn::Select" in node or "Fn::Split" in node or "Fn::If" in node:
        return "*"
    return {k: _resolve(v, template, region) for k, v in node.items()}


_EXPORTS: dict[str, tuple[dict, object]] = {}  # export name -> (the exporting template, the output's value)


def identity_policies(template: dict) -> Iterator[tuple[str, dict]]:
    for lid, res in template.get("Resources", {}).items():
        props = res.get("Properties", {})
        if res["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            yield lid, props["PolicyDocument"]
        elif res["Type"] == "AWS::IAM::Role":
            for p in props.get("Policies", []):
                yield lid, p["PolicyDocument"]


def parliament(stacks: dict[str, Path]) -> list[Finding]:
    for path in stacks.values():
        template = json.loads(path.read_text())
        for output in template.get("Outputs", {}).values():
            if isinstance(output.get("Export", {}).get("Name"), str):
                _EXPORTS[output["Export"]["Name"]] = (template, output["Value"])
    docs = []
    for name, path in stacks.items():
        template = json.loads(path.read_text())
        docs += [(f"{name}/{lid}", _resolve(doc, template, _region(path))) for lid, doc in identity_policies(template)]
    run = subprocess.run([str(SCAN_BIN / "python"), "-c", _PARLIAMENT], input=json.dumps(docs),
                         capture_output=True, text=True, check=True)
    return [Finding("parliament", f["issue"], f["where"], f["detail"]) for f in json.loads(run.stdout)]


# Run in .venv-scan's interpreter (parliament is not a runtime dependency of the project).
_PARLIAMENT = """
import json, sys
from parliament import analyze_policy_string
out = []
for where, doc in json.load(sys.stdin):
    try:
        found = analyze_policy_string(json.dumps(doc), include_community_auditors=True).findings
    except Exception as exc:  # parliament's own failure on a document: a finding to look at, not a silent pass
        out.append({"issue": "PARLIAMENT_FAILED", "where": where, "detail": f"{type(exc).__name__}: {exc}"[:300]})
        continue
    for f in found:
        out.append({"issue": f.issue, "where": where, "detail": f"{f.severity}: {json.dumps(f.detail)[:300]}"})
print(json.dumps(out))
"""


def _region(path: Path) -> str:
    text = path.read_text()
    found = re.search(r'arn:aws:[a-z0-9-]+:([a-z]{2}-[a-z]+-\d):', text)
    return found.group(1) if found else "us-east-1"


SCANNERS = {"checkov": checkov, "cfn-guard": cfn_guard, "cfripper": cfripper, "parliament": parliament}


def _findings(scanner: str, stacks: dict[str, Path], save: Path | None, load: Path | None) -> list[Finding]:
    if load is not None:
        return [Finding(**f) for f in json.loads((load / f"{scanner}.json").read_text())]
    found = SCANNERS[scanner](stacks)
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        (save / f"{scanner}.json").write_text(json.dumps([f.__dict__ for f in found], indent=1))
    return found


def acknowledged(finding: Finding, acks: list[dict]) -> dict | None:
    for ack in acks:
        if ack["scanner"] == finding.scanner and fnmatch.fnmatchcase(finding.rule, ack["rule"]) \
                and fnmatch.fnmatchcase(finding.where, ack["where"]):
            return ack
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.scan_templates", description=__doc__.splitlines()[0])
    parser.add_argument("--assembly", action="append", type=Path, help="a synthesized cloud assembly (repeatable)")
    parser.add_argument("--only", choices=sorted(SCANNERS), action="append", help="run only these scanners")
    parser.add_argument("--save", type=Path, help="write each scanner's findings to DIR/SCANNER.json")
    parser.add_argument("--load", type=Path, help="read the findings --save wrote instead of scanning again")
    args = parser.parse_args(argv)
    missing = [str(p) for p in (SCAN_BIN / "checkov", GUARD) if not p.exists()]
    if missing:
        print(f"error: scanners not installed ({', '.join(missing)}): run `make scan-setup`", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="scan-") as tmp:
        assemblies = args.assembly or synthesize(Path(tmp))
        stacks = {}
        for assembly in assemblies:
            for name, path in templates(assembly):
                stacks[f"{assembly.name}:{name}"] = path
        acks = yaml.safe_load(ACKS.read_text())["acknowledged"]
        findings = [f for s in (args.only or SCANNERS) for f in _findings(s, stacks, args.save, args.load)]
    used, open_, verdicts = set(), [], {}
    for f in findings:
        ack = acknowledged(f, acks)
        if ack is None:
            open_.append(f)
        else:
            used.add(id(ack))
            verdicts[ack["verdict"]] = verdicts.get(ack["verdict"], 0) + 1
    by_scanner = {s: sum(f.scanner == s for f in findings) for s in (args.only or SCANNERS)}
    print(f"{len(stacks)} templates; findings by scanner: {by_scanner}; {len(findings) - len(open_)} acknowledged "
          f"({ACKS.relative_to(ROOT)}: {verdicts}), {len(open_)} open")
    for f in sorted(set(open_), key=Finding.line):
        print(f"OPEN {f.line()}")
    for ack in acks:
        if id(ack) not in used and ack["scanner"] in (args.only or SCANNERS):
            print(f"UNUSED ack {ack['scanner']} {ack['rule']} {ack['where']}")
    return 1 if open_ else 0


if __name__ == "__main__":
    sys.exit(main())
