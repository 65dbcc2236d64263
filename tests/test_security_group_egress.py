"""Outbound traffic is what the rules say. CloudFormation gives a security group all outbound traffic when its own
SecurityGroupEgress names no rule ("When you create a security group, if you do not add egress rules, we add egress
rules that allow all outbound IPv4 and IPv6 traffic": AWS::EC2::SecurityGroup, CloudFormation Template Reference),
and separate AWS::EC2::SecurityGroupEgress resources add to that rule, they do not replace it. The FSx for Lustre
group reaches its clients and itself on the Lustre ports only (FSx for Lustre User Guide, "File system access
control with Amazon VPC"; constructs_lib/cluster_security.py)."""

from __future__ import annotations

import json

from constructs_lib.cluster_security import LUSTRE_PORTS


def _every_template(synth, teams_synth):
    for preset in ("small", "intermediate", "huge"):
        yield from ((f"{preset}/{name}", t) for name, t in synth(preset).templates.items())
    for team, by_id in teams_synth.templates.items():
        yield from ((f"{team}/{sid}", t) for sid, t in by_id.items())
    yield from teams_synth.shared.items()


def test_every_security_group_writes_its_egress(synth, teams_synth):
    """A group with no egress of its own carries CDK's no-traffic placeholder rule; none is left to the default."""
    groups = 0
    for where, template in _every_template(synth, teams_synth):
        for lid, res in template["Resources"].items():
            if res["Type"] == "AWS::EC2::SecurityGroup":
                groups += 1
                assert res["Properties"].get("SecurityGroupEgress"), \
                    f"{where}/{lid}: no SecurityGroupEgress, so CloudFormation allows it all outbound traffic"
    assert groups


def _peer(rule: dict) -> str:
    """The logical ID of the group a rule names, or its CIDR."""
    dest = rule.get("DestinationSecurityGroupId") or rule.get("SourceSecurityGroupId")
    return dest["Fn::GetAtt"][0] if isinstance(dest, dict) else rule.get("CidrIp") or rule.get("CidrIpv6") or str(dest)


def _egress(template: dict, group: str) -> set[tuple[str, str, int, int]]:
    """Every outbound rule of `group`: its own and the separate SecurityGroupEgress resources on it."""
    res = template["Resources"]
    rules = list(res[group]["Properties"].get("SecurityGroupEgress", []))
    rules += [r["Properties"] for r in res.values() if r["Type"] == "AWS::EC2::SecurityGroupEgress"
              and json.dumps(r["Properties"]["GroupId"]) == json.dumps({"Fn::GetAtt": [group, "GroupId"]})]
    return {(_peer(r), r["IpProtocol"], r.get("FromPort"), r.get("ToPort")) for r in rules}


def test_the_lustre_group_reaches_only_its_clients_and_itself(synth, teams_synth):
    ports = {(p.to_rule_json()["fromPort"], p.to_rule_json()["toPort"]) for p in LUSTRE_PORTS}
    assert ports == {(988, 988), (1018, 1023)}
    networks = [synth("huge").templates["NetworkStack"]] + [t["NetworkStack"] for t in teams_synth.templates.values()]
    for template in networks:
        groups = {lid for lid, r in template["Resources"].items() if r["Type"] == "AWS::EC2::SecurityGroup"}
        (lustre,) = (g for g in groups if g.startswith("SecurityLustre"))
        (cluster,) = (g for g in groups if g.startswith("SecurityCluster"))
        assert _egress(template, lustre) == {(peer, "tcp", low, high) for peer in (cluster, lustre)
                                             for low, high in ports}
        # Written in the group itself, so CloudFormation adds no allow-all rule beside them.
        assert {_peer(r) for r in template["Resources"][lustre]["Properties"]["SecurityGroupEgress"]} == {cluster}
