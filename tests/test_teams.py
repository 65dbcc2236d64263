"""Issue 6: one stamped estate per team, tags, guardrails, budgets, validation."""

from __future__ import annotations

import json

import pytest
import yaml
from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

from workloads import ConfigError
from workloads.planning.teams import load_teams

from .conftest import TEAMS_FILE, e2e_beyond
from .test_quality import lint

TEAMS = yaml.safe_load(TEAMS_FILE.read_text())["teams"]
STACK_IDS = {"GuardrailsStack", "NetworkStack", "DataStack", "TrainStack", "InferenceStack", "MlUsersStack"}
# One per account and region, outside every team's stage (test_log_groups.py).
SHARED = {("123456789012", "us-west-2"): "Shared-123456789012-us-west-2", (None, "us-east-1"): "Shared-us-east-1"}


def test_one_stage_per_team_with_prefixed_stacks(teams_synth):
    assert set(teams_synth.templates) == {t["name"] for t in TEAMS}
    for team, stacks in teams_synth.artifacts.items():
        assert set(stacks) == STACK_IDS
        for sid, artifact in stacks.items():
            assert artifact["displayName"] == f"{team}/{sid}"  # cdk deploy 'team/*'
            assert artifact["properties"]["stackName"] == f"{team}-{sid}"
    # cdk deploy 'Shared-*': one per account and region of the file, the same CloudFormation stack name in each.
    assert set(teams_synth.shared_artifacts) == set(SHARED.values())
    for (account, region), sid in SHARED.items():
        artifact = teams_synth.shared_artifacts[sid]
        assert artifact["displayName"] == sid and artifact["properties"]["stackName"] == "sagemaker-job-logs"
        assert artifact["environment"] == f"aws://{account or 'unknown-account'}/{region}"
        assert artifact["properties"]["terminationProtection"]


def test_teams_deploy_to_their_own_account_and_region(teams_synth):
    for t in TEAMS:
        for artifact in teams_synth.artifacts[t["name"]].values():
            assert artifact["environment"] == f"aws://{t.get('account', 'unknown-account')}/{t['region']}"


def _taggable(rtype: str, region: str) -> bool:
    try:
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(region, rtype).schema
    except Exception:
        return False
    return "Tags" in schema.get("properties", {})


def _tag_map(tags) -> dict:
    if isinstance(tags, dict):  # some types take a plain map
        return tags
    return {t.get("Key", t.get("key")): t.get("Value", t.get("value")) for t in tags}


def test_every_taggable_resource_carries_the_cost_tags(teams_synth):
    checked = 0
    for t in TEAMS:
        expected = {"team": t["name"], "cost-center": t["cost_center"], "stage": t["stage"]}
        for sid, template in teams_synth.templates[t["name"]].items():
            for lid, res in template["Resources"].items():
                if res["Type"].startswith("Custom::") or not _taggable(res["Type"], t["region"]):
                    continue
                tags = _tag_map(res.get("Properties", {}).get("Tags", []))
                missing = {k: v for k, v in expected.items() if tags.get(k) != v}
                assert not missing and tags.get("workload"), f"{t['name']}/{sid} {lid} ({res['Type']}) lacks {missing}"
                checked += 1
    assert checked > 100  # the check reached the estates' resources


def test_every_role_has_the_team_boundary(teams_synth):
    roles = 0
    for team, stacks in teams_synth.templates.items():
        for sid, template in stacks.items():
            for lid, res in template["Resources"].items():
                if res["Type"] == "AWS::IAM::Role":
                    boundary = json.dumps(res["Properties"].get("PermissionsBoundary"))
                    assert "GuardrailsBoundary" in boundary, f"{team}/{sid} {lid} has no boundary"
                    roles += 1
    assert roles >= 3 * 5  # training, model, flow-log, notebook, handler roles ... in every team


def _guardrail(teams_synth, team: str, prefix: str, stack: str = "GuardrailsStack") -> dict:
    res = teams_synth.templates[team][stack]["Resources"]
    return next(v["Properties"] for k, v in res.items() if k.startswith(prefix))


def test_users_may_create_only_allowed_instance_types_with_the_team_tag(teams_synth):
    for t in TEAMS:
        statements = _guardrail(teams_synth, t["name"], "MlUsersPolicy", "MlUsersStack")["PolicyDocument"]["Statement"]
        create = next(s for s in statements if s["Sid"] == "CreateOnAllowedInstanceTypes")
        assert "sagemaker:CreateTrainingJob" in create["Action"] and "sagemaker:CreateEndpointConfig" in create["Action"]
        assert create["Condition"]["ForAllValues:StringLike"]["sagemaker:InstanceTypes"] == \
            [f"ml.{f}.*" for f in t["allowed_instance_families"]]
        assert create["Condition"]["Null"] == {"sagemaker:InstanceTypes": "false"}
        assert create["Condition"]["StringEquals"] == {"aws:RequestTag/team": t["name"]}


def test_boundary_denies_iam_changes_and_other_instance_types(teams_synth):
    statements = _guardrail(teams_synth, "vision", "GuardrailsBoundary")["PolicyDocument"]["Statement"]
    by_sid = {s["Sid"]: s for s in statements}
    assert by_sid["NoIamChanges"]["Effect"] == "Deny"
    assert by_sid["OnlyAllowedSageMakerTypes"]["Condition"]["ForAnyValue:StringNotLike"]["sagemaker:InstanceTypes"][0] \
        == "ml.g5.*"
    assert by_sid["OnlyAllowedEc2Types"]["Condition"]["StringNotLike"]["ec2:InstanceType"][0] == "g5.*"


def test_budget_alerts_at_80_actual_and_100_forecast(teams_synth):
    for t in TEAMS:
        budget = _guardrail(teams_synth, t["name"], "GuardrailsBudget")
        assert budget["Budget"]["BudgetLimit"] == {"Amount": t["budget"]["monthly_usd"], "Unit": "USD"}
        assert budget["Budget"]["CostFilters"] == {"TagKeyValue": [f"user:team${t['name']}"]}
        alerts = {(n["Notification"]["NotificationType"], n["Notification"]["Threshold"]) for n in
                  budget["NotificationsWithSubscribers"]}
        assert alerts == {("ACTUAL", 80), ("FORECASTED", 100)}
        emails = {s["Address"] for n in budget["NotificationsWithSubscribers"] for s in n["Subscribers"]}
        assert emails == set(t["budget"]["alert_emails"])


def test_prod_stacks_are_termination_protected(teams_synth):
    for t in TEAMS:
        for sid, artifact in teams_synth.artifacts[t["name"]].items():
            protected = bool(artifact["properties"].get("terminationProtection"))
            assert protected == (t["stage"] == "prod"), sid


def test_two_teams_in_one_account_do_not_collide(teams_synth):
    same = [t["name"] for t in TEAMS if (t.get("account"), t["region"]) == ("123456789012", "us-west-2")]
    assert len(same) >= 2
    names: dict[str, str] = {}
    keys = 0
    for team in same:
        for sid, template in teams_synth.templates[team].items():
            for lid, res in template["Resources"].items():
                keys += res["Type"] == "AWS::KMS::Key"
                props = res.get("Properties", {})
                for prop in ("BucketName", "RoleName", "ClusterName", "Name", "TopicName", "EndpointName",
                             "ManagedPolicyName", "FileSystemName", "StateMachineName"):
                    value = props.get(prop)
                    if isinstance(value, str):  # physical names are unique per resource type
                        key = f"{res['Type']} {value}"
                        assert key not in names, f"{key} used by {names.get(key)} and {team}/{sid}/{lid}"
                        names[key] = f"{team}/{sid}/{lid}"
    assert keys == 3 * len(same)  # each team its own data key, logs key and alarm topic's key


# The first team's stacks here; the others' (the same constructs, other settings) in make test-e2e, which CI runs.
@pytest.mark.parametrize("team", e2e_beyond([t["name"] for t in TEAMS], [TEAMS[0]["name"]]))
def test_team_templates_are_cfn_lint_clean(teams_synth, team):
    paths = teams_synth.paths[team]
    problems = [f"{team}/{sid}: {m}" for sid, path in paths.items()
                for m in lint(path, teams_synth.artifacts[team][sid]["environment"].rsplit("/", 1)[-1])]
    problems += [f"{sid}: {m}" for sid, art in teams_synth.shared_artifacts.items()  # the account's shared stacks
                 for m in lint(teams_synth.outdir / art["properties"]["templateFile"],
                               art["environment"].rsplit("/", 1)[-1])]
    assert not problems, "\n".join(problems)


def test_one_team_only(synth_root):
    import aws_cdk as cdk

    from .conftest import build_app

    from .conftest import cdk_json_context
    app = cdk.App(outdir=str(synth_root / "one-team"),
                  context={**cdk_json_context(), "teams": str(TEAMS_FILE), "team": "tabular"})
    estates = build_app(app)
    assert len(estates) == 1 and estates[0].network.stack_name == "tabular-NetworkStack"


def _team_file(tmp_path, change) -> str:
    data = yaml.safe_load(TEAMS_FILE.read_text())
    change(data["teams"])
    path = tmp_path / "teams.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize("change, field, fragment", [
    (lambda ts: ts.append(dict(ts[0])), "teams[vision].name", "duplicate team name"),
    (lambda ts: ts[0].update(name="Vision_Team"), "teams[Vision_Team].name", "not usable in stack names"),
    (lambda ts: ts[1].update(allowed_instance_families=["p5", "inf2", "g5", "m5", "c5"]),
     "teams[language].allowed_instance_families", "excludes instance families the workload needs"),
    (lambda ts: ts[1].pop("account"), "teams[language].account", "a prod team must name its account"),
    (lambda ts: ts[2].update(availability_zone="us-west-2a"), "teams[tabular].availability_zone",
     "not a zone of region us-east-1"),
    (lambda ts: ts[0]["budget"].pop("alert_emails"), "teams[vision].budget.alert_emails", "required"),
    # Names keep teams' models apart (model ARNs carry no tag): vision's users may use every model named vision-*.
    (lambda ts: ts.append({**ts[0], "name": "vision-x"}), "teams[vision-x].name", "could use its models"),
])
def test_bad_teams_files_are_refused(tmp_path, change, field, fragment):
    path = _team_file(tmp_path, change)
    with pytest.raises(ConfigError) as err:
        load_teams(path)
    assert str(err.value).startswith(f"{field} = ") and fragment in str(err.value), str(err.value)
    # Through `python app.py` (exit 2, one line per mistake): test_every_mistake.py, with a file of seven.


def test_a_team_whose_families_cannot_train_its_workload_is_told_which_would():
    """Before: nine lines of `overrides.training.instance_type = None` (no override was set), one per candidate."""
    tabular = {**TEAMS[2], "allowed_instance_families": ["g5"]}
    with pytest.raises(ConfigError) as err:
        load_teams_from(tabular)
    assert [str(e) for e in err.value.errors] == [
        "teams[tabular].allowed_instance_families = ['g5']: none of the team's families can train this workload; "
        "allowed: a list including c5 or c6i or m5 or r5 (the families of the types that could train this workload: "
        "c5.xlarge, c5.2xlarge, c5.4xlarge, c5.9xlarge, c5.18xlarge, c6i.xlarge, c6i.2xlarge, c6i.4xlarge, "
        "c6i.8xlarge, m5.large, m5.xlarge, m5.2xlarge, m5.4xlarge, m5.12xlarge, m5.24xlarge, r5.xlarge, r5.2xlarge, "
        "r5.4xlarge, r5.12xlarge)"]  # every CPU family the catalog offers and SageMaker trains on (issue 42)


def load_teams_from(*teams: dict, folder=None):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(folder or tmp) / "teams.yaml"
        path.write_text(yaml.safe_dump({"teams": list(teams)}))
        return load_teams(str(path))


def test_a_workload_file_is_found_beside_the_teams_file_and_a_missing_one_says_where_it_looked(tmp_path):
    """Before: the path was read from the current directory, and "file not found" did not say where it looked."""
    from .conftest import ROOT

    (tmp_path / "workloads").mkdir()
    (tmp_path / "workloads" / "churn.yaml").write_text((ROOT / "workloads" / "presets" / "small.yaml").read_text())
    tabular = {**TEAMS[2], "workload": "workloads/churn.yaml"}
    assert load_teams_from(tabular, folder=tmp_path)[0].plan.workload.name == "small"
    (tmp_path / "workloads" / "churn.yaml").unlink()
    with pytest.raises(ConfigError) as err:
        load_teams_from(tabular, folder=tmp_path)
    assert str(err.value).startswith(
        f"teams[tabular].workload = 'workloads/churn.yaml': file not found (looked for {tmp_path}/workloads/churn.yaml: "
        f"a path in a teams file is relative to the teams file's folder, {tmp_path}/)")


@pytest.mark.parametrize("text, line", [
    ("teams:\n  - name: a\n    region: us-east-1\n    name: b\n", "duplicate key 'name' (first at line 2, again at line 4)"),
])
def test_a_key_given_twice_in_a_teams_file_is_refused_with_both_lines(tmp_path, text, line):
    path = tmp_path / "teams.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_teams(str(path))
    assert line in str(err.value)


def test_a_key_given_twice_in_a_workload_is_refused_with_both_lines(tmp_path):
    """Before: the last `region` won silently, and a later error blamed the availability zone."""
    from workloads import load

    path = tmp_path / "w.yaml"
    path.write_text("name: a\nregion: us-east-1\navailability_zone: us-east-1a\nmodel: {parameters_billion: 1}\n"
                    "data: {dataset_size_gib: 10}\nregion: us-west-2\n")
    with pytest.raises(ConfigError) as err:
        load(str(path))
    assert str(err.value).startswith("workload = '") and str(err.value).endswith(  # a long path is shortened
        ": malformed YAML at line 6, column 1: duplicate key 'region' (first at line 2, again at line 6); allowed: "
        "well-formed YAML with each key once")


@pytest.mark.e2e  # an emulator deploy: make test-e2e (CI)
def test_team_stage_deploys_to_the_emulator(teams_synth):
    from tools.emulator import deployed_resources, running

    with running("us-west-2") as emu:
        emu.bootstrap(quiet=True)
        vision = load_teams(TEAMS_FILE, only="vision")[0]
        emu.deploy_estate("--app", str(teams_synth.outdir), plan=vision.plan, stage="vision",
                          shared=vision.shared_stack, quiet=True)
        reports = {r.name: r for r in deployed_resources(emu, teams_synth.outdir)
                   if r.status != "NOT_DEPLOYED"}
        iam = emu.client("iam")
        roles = [iam.get_role(RoleName=r["RoleName"])["Role"] for r in iam.list_roles()["Roles"]
                 if r["RoleName"].startswith("vision-")]
    assert {n for n in reports if n.startswith("vision/")} == {f"vision/{sid}" for sid in STACK_IDS}
    # Only the one team, and its account and region's shared stack; the other region's was not deployed.
    assert {n for n in reports if not n.startswith("vision/")} == {vision.shared_stack}
    assert all(r.status == "CREATE_COMPLETE" for r in reports.values())
    assert roles and all("PermissionsBoundary" in r for r in roles)


def test_the_plan_opens_with_a_summary_and_the_teams_budget_verdict():
    """Before: the plan was 192 lines with no summary, and the team's budget line was the last of about 110."""
    import subprocess
    import sys

    from .conftest import ROOT

    out = subprocess.run([sys.executable, "-m", "workloads", "plan", "-c", f"teams={TEAMS_FILE}", "-c", "team=vision"],
                         cwd=ROOT, capture_output=True, text=True, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    head = out.stdout.splitlines()[:8]
    assert head[1].startswith("  summary: train on 4 x g5.48xlarge (sagemaker-jobs): ")
    assert any(line.strip().startswith("team vision: $") and line.endswith(": fits") for line in head), head
    assert any("a month of the estate $" in line for line in head), head
