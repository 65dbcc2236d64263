"""Dashboards and alarms (issue 35): every alarm and dashboard metric of every variant is one the services publish
(workloads/catalog/metrics.yaml: names, dimensions and statistics from their documentation), every monitor's alarm
notifies the estate's encrypted topic, CloudWatch may use the topic's key, and a team's addresses are subscribed."""

from __future__ import annotations

import json
import math

import pytest

from workloads import load, plan
from workloads.planning.monitoring import metric_facts, plan_alarms

from .conftest import TEAMS_FILE, VARIANTS

FACTS = metric_facts()["metrics"]


def test_every_metric_is_sourced():
    sources = metric_facts()["sources"]
    for key, fact in FACTS.items():
        assert fact["source"] in sources, key
        assert sources[fact["source"]]["url"].startswith("https://docs.aws.amazon.com/"), key


def _check(namespace: str, name: str, dimensions: list[str], statistic: str | None, where: str) -> None:
    fact = FACTS.get(f"{namespace}:{name}")
    assert fact is not None, f"{where}: {namespace} {name} is not in workloads/catalog/metrics.yaml"
    published = [fact["dimensions"], *fact.get("dimension_sets", ())]
    assert any(sorted(dimensions) == sorted(d) for d in published), f"{where}: {name} with {dimensions}"
    if statistic is not None:
        assert statistic in fact["statistics"], f"{where}: {name} {statistic}"


def _body(value) -> str:
    """A dashboard body with every token as a placeholder string (the widgets' shape is what is checked)."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        return "".join(_body(p) if isinstance(p, str) else "TOKEN" for p in value["Fn::Join"][1])
    return "TOKEN"


@pytest.mark.parametrize("name", list(VARIANTS))
def test_alarms_and_dashboards_read_published_metrics(name, variant_synth_by_name):
    s = variant_synth_by_name(name)
    workload, overrides = VARIANTS[name]
    p = plan(load(workload, overrides))
    topics = {lid for lid, r in s.templates["NetworkStack"]["Resources"].items() if r["Type"] == "AWS::SNS::Topic"}
    assert len(topics) == 1
    monitors = 0
    for stack, template in s.templates.items():
        for lid, r in template["Resources"].items():
            if r["Type"] == "AWS::CloudWatch::Alarm":
                props = r["Properties"]
                _check(props["Namespace"], props["MetricName"], [d["Name"] for d in props.get("Dimensions", [])],
                       props.get("Statistic"), f"{stack}/{lid}")
                if "Monitor" in lid:  # the monitors' alarms notify the estate's topic, firing and back to OK
                    monitors += 1
                    for actions in (props["AlarmActions"], props["OKActions"]):
                        assert json.dumps(actions).count("NetworkStack") or json.dumps(actions).count("Alarms"), lid
                    assert props["TreatMissingData"] == "notBreaching"
            if r["Type"] == "AWS::CloudWatch::Dashboard":
                body = json.loads(_body(r["Properties"]["DashboardBody"]))
                for widget in body["widgets"]:
                    for row in widget["properties"].get("metrics", []):
                        if isinstance(row[-1], dict) and "expression" in row[-1]:
                            continue  # math over the metrics listed beside it
                        opts = row[-1] if isinstance(row[-1], dict) else {}
                        fields = row[:-1] if opts else row
                        namespace, metric, *dims = fields
                        _check(namespace, metric, dims[0::2], opts.get("stat"), f"{stack}/{lid} dashboard")
    assert monitors == len(plan_alarms(p.training, p.inference, latency_ms=p.workload.inference.latency_ms))


INVOCATION_METRICS = {"Invocations", "Invocation4XXErrors", "Invocation5XXErrors", "ModelLatency"}


def _endpoint_kinds(template: dict) -> dict[str, str]:
    """Endpoint logical ID -> its kind's row in metrics.yaml invocation_dimensions, read from the template: an
    endpoint with an inference component is `realtime-components`; async has AsyncInferenceConfig; serverless a
    ServerlessConfig."""
    res = template["Resources"]
    kinds = {}
    for lid, r in res.items():
        if r["Type"] != "AWS::SageMaker::Endpoint":
            continue
        config = res[r["Properties"]["EndpointConfigName"]["Fn::GetAtt"][0]]["Properties"]
        hosts_component = any(c["Type"] == "AWS::SageMaker::InferenceComponent"
                              and lid in json.dumps(c["Properties"]["EndpointName"]) for c in res.values())
        kind = "async" if "AsyncInferenceConfig" in config else \
            "serverless" if any("ServerlessConfig" in v for v in config["ProductionVariants"]) else \
            "realtime-components" if hosts_component else "realtime"
        kinds[lid] = kind
    return kinds


def _names(template: dict) -> dict[str, str]:
    """A token's JSON (endpoint name, component name) -> the endpoint logical ID it belongs to."""
    res, out = template["Resources"], {}
    for lid, r in res.items():
        if r["Type"] == "AWS::SageMaker::Endpoint":
            out[json.dumps(r["Properties"].get("EndpointName", {"Fn::GetAtt": [lid, "EndpointName"]}),
                           sort_keys=True)] = lid
            out[json.dumps({"Fn::GetAtt": [lid, "EndpointName"]}, sort_keys=True)] = lid
            for c in res.values():
                if c["Type"] == "AWS::SageMaker::InferenceComponent" and lid in json.dumps(c["Properties"]["EndpointName"]):
                    out[json.dumps(c["Properties"]["InferenceComponentName"], sort_keys=True)] = lid
    return out


@pytest.mark.parametrize("name", ["small", "intermediate", "huge", "small-all-kinds", "intermediate-copies-to-zero"])
def test_each_invocation_alarm_uses_its_endpoints_published_dimensions(name, variant_synth_by_name):
    """Every alarm on requests, errors or latency names the dimensions its endpoint's kind publishes (metrics.yaml
    invocation_dimensions): per InferenceComponentName on a component endpoint, per endpoint and variant elsewhere.
    Before: the component endpoints' 5xx and latency alarms used EndpointName/VariantName, got no data, and stayed
    silent (notBreaching) forever."""
    template = variant_synth_by_name(name).templates["InferenceStack"]
    kinds, names = _endpoint_kinds(template), _names(template)
    table = metric_facts()["invocation_dimensions"]
    seen = set()
    for lid, r in template["Resources"].items():
        props = r["Properties"] if r["Type"] == "AWS::CloudWatch::Alarm" else None
        if not props or props["Namespace"] != "AWS/SageMaker" or props["MetricName"] not in INVOCATION_METRICS:
            continue
        dims = {d["Name"]: json.dumps(d["Value"], sort_keys=True) for d in props["Dimensions"]}
        key = dims.get("InferenceComponentName") or dims["EndpointName"]
        endpoint = names.get(key)
        assert endpoint, f"{lid}: {props['MetricName']} names no endpoint or component of this stack ({key})"
        assert sorted(dims) == sorted(table[kinds[endpoint]]), f"{lid} on {kinds[endpoint]} {endpoint}: {sorted(dims)}"
        seen.add(kinds[endpoint])
    assert seen, "no invocation alarm found"
    if name == "intermediate":
        assert "realtime-components" in seen


def test_a_latency_target_is_an_alarm_at_the_plans_figure(synth):
    s = synth("small", {"inference.latency_ms": "300"})
    alarms = s.resources("InferenceStack", "AWS::CloudWatch::Alarm")
    latency = [a["Properties"] for a in alarms.values() if a["Properties"]["MetricName"] == "ModelLatency"]
    kinds = [k for k in plan(load("small", {"inference.latency_ms": "300"})).inference if k in ("realtime", "serverless")]
    assert kinds and [(a["Threshold"], a["Statistic"], a["ComparisonOperator"]) for a in latency] == [
        (300_000, "Average", "GreaterThanThreshold")] * len(kinds)  # microseconds, one per endpoint it applies to


def test_the_alarm_topic_is_encrypted_with_a_key_cloudwatch_may_use(synth):
    s = synth("huge")
    net = s.templates["NetworkStack"]["Resources"]
    topic = s.one("NetworkStack", "AWS::SNS::Topic")["Properties"]
    key_id = topic["KmsMasterKeyId"]["Fn::GetAtt"][0]
    statements = net[key_id]["Properties"]["KeyPolicy"]["Statement"]
    cw = [st for st in statements if st.get("Principal", {}).get("Service") == "cloudwatch.amazonaws.com"]
    assert len(cw) == 1 and sorted(cw[0]["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert "aws:SourceAccount" in cw[0]["Condition"]["StringEquals"]
    fsx = [a["Properties"] for a in s.resources("TrainStack", "AWS::CloudWatch::Alarm").values()
           if a["Properties"]["MetricName"] == "FreeDataStorageCapacity"]
    capacity = plan(load("huge")).training.fsx.storage_capacity_gib
    assert [a["Threshold"] for a in fsx] == [pytest.approx(capacity * 2**30 * 0.10)]


def test_a_teams_alarms_email_its_addresses(teams_synth):
    import yaml

    for team in yaml.safe_load(TEAMS_FILE.read_text())["teams"]:
        subs = [r["Properties"] for r in teams_synth.templates[team["name"]]["NetworkStack"]["Resources"].values()
                if r["Type"] == "AWS::SNS::Subscription"]
        wanted = team.get("alarm_emails") or team["budget"]["alert_emails"]
        assert sorted(x["Endpoint"] for x in subs) == sorted(wanted)
        assert {x["Protocol"] for x in subs} == {"email"}


def test_a_failed_or_timed_out_batch_run_is_an_alarm(synth):
    """The scheduled batch runs (a state machine around the transform job) alarm when one fails or times out, on that
    state machine: a nightly failure used to show only as an empty output prefix."""
    s = synth("huge")
    machines = s.resources("InferenceStack", "AWS::StepFunctions::StateMachine")
    assert len(machines) == 1
    machine, = machines
    runs = {a["Properties"]["MetricName"]: a["Properties"] for a in s.resources("InferenceStack", "AWS::CloudWatch::Alarm").values()
            if a["Properties"]["Namespace"] == "AWS/States"}
    assert sorted(runs) == ["ExecutionsFailed", "ExecutionsTimedOut"]
    for props in runs.values():
        assert [d["Name"] for d in props["Dimensions"]] == ["StateMachineArn"]
        assert machine in json.dumps(props["Dimensions"]) and props["Threshold"] == 0
        assert props["ComparisonOperator"] == "GreaterThanThreshold" and props["EvaluationPeriods"] == 1


@pytest.mark.parametrize("name", ["small", "intermediate", "huge"])
def test_a_batch_alarm_points_to_the_logs_of_what_the_run_drives(name, variant_synth_by_name):
    """A drained batch (the async endpoint's Distributed Map) is no transform job: its alarms name the Map Run and the
    async endpoint's log group, a transform job's the TransformJobs log group (one was sent to the wrong one)."""
    workload, overrides = VARIANTS[name]
    batch = plan(load(workload, overrides or {})).inference.get("batch")
    s = variant_synth_by_name(name)
    runs = [a["Properties"] for a in s.resources("InferenceStack", "AWS::CloudWatch::Alarm").values()
            if a["Properties"]["Namespace"] == "AWS/States"]
    assert batch is not None and len(runs) == 2, name
    for props in runs:
        text = props["AlarmDescription"]
        if batch.serving.drain == "async":
            assert "/aws/sagemaker/Endpoints/" in text and "Map Run" in text and "TransformJobs" not in text, text
        else:
            assert "/aws/sagemaker/TransformJobs" in text and "async" not in text, text


@pytest.mark.parametrize("variant", ["huge", "teams"])
def test_every_alarm_may_page_its_own_estate_and_no_other(synth, teams_synth, variant):
    """Every alarm that notifies a topic is admitted by that topic and its key under the name CloudFormation gives it
    ("<stack name>-<logical ID>-<suffix>": no alarm sets AlarmName), and no other estate's topic admits it: another
    team's alarm cannot page this team's addresses (outside review R5 L6)."""
    from .contract_policy import Call, Principal, evaluate
    from .test_runtime_contract import teams_world, world_of

    world = teams_world(teams_synth) if variant == "teams" else world_of(synth("huge"))
    cloudwatch = Principal(arn="cloudwatch.amazonaws.com", account="", identity=[], service="cloudwatch.amazonaws.com")
    topics = {world.ref(st, lid): (st, r)
              for st in world.stacks.values() for lid, r in st.template["Resources"].items()
              if r["Type"] == "AWS::SNS::Topic"}
    alarms = [(st, lid, r["Properties"]) for st in world.stacks.values()
              for lid, r in st.template["Resources"].items() if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert alarms
    for st, lid, alarm in alarms:
        source = {"aws:SourceAccount": st.account,
                  "aws:SourceArn": f"arn:aws:cloudwatch:{st.region}:{st.account}:alarm:{st.stack_name}-{lid}-AbCdEf123456"}
        targets = {world._resolve(st, a) for a in alarm.get("AlarmActions", [])}
        for topic, (topic_stack, topic_resource) in topics.items():
            key = world._resolve(topic_stack, topic_resource["Properties"]["KmsMasterKeyId"])
            # another team's estate in the same account and region (a team's stacks are named TEAM-...)
            another_estate = (variant == "teams" and st.name.split("-")[0] != topic_stack.name.split("-")[0]
                              and (topic_stack.account, topic_stack.region) == (st.account, st.region))
            for action, resource in (("sns:Publish", topic), ("kms:GenerateDataKey", key)):
                allowed = evaluate(cloudwatch, Call(action, resource, "alarm actions", context=source), world).allowed
                if topic in targets:
                    assert allowed, (st.name, lid, action)
                elif another_estate:
                    assert not allowed, (st.name, lid, "pages", topic_stack.name, action)


def _async_endpoints(name: str, variant_synth_by_name) -> tuple[dict, list[str], dict]:
    """A variant's InferenceStack resources, its async endpoints' logical IDs and its plan's inference."""
    template = variant_synth_by_name(name).templates["InferenceStack"]
    asyncs = [lid for lid, kind in _endpoint_kinds(template).items() if kind == "async"]
    assert asyncs, name
    workload, overrides = VARIANTS[name]
    return template["Resources"], asyncs, plan(load(workload, overrides)).inference


@pytest.mark.parametrize("name", ["huge", "intermediate", "small-all-kinds"])
def test_every_async_endpoint_alarms_on_its_queues_failed_and_expired_requests(name, variant_synth_by_name):
    """InvokeEndpointAsync returns once a request is queued, so a request that fails or outlives its TTL is seen only
    in the queue's outcome metrics (metrics.yaml async_failure_alarms, from AWS's Monitor Asynchronous Endpoint page):
    every async endpoint alarms on each, with the dimensions the table records and its variant's name, to the topic;
    where the nightly batch drains through it, the description says the drain's Succeeded run does not mean answered.
    Before: only Invocation5XXErrors was alarmed, and a drained night whose requests all expired stayed silent."""
    res, asyncs, inference = _async_endpoints(name, variant_synth_by_name)
    batch = inference.get("batch")
    drained = batch is not None and batch.serving is not None and batch.serving.drain == "async"
    alarms = [r["Properties"] for r in res.values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    for endpoint in asyncs:
        config = res[res[endpoint]["Properties"]["EndpointConfigName"]["Fn::GetAtt"][0]]["Properties"]
        variant, = [v["VariantName"] for v in config["ProductionVariants"]]
        for key in metric_facts()["async_failure_alarms"]:
            namespace, metric = key.split(":")
            fact = FACTS[key]
            found = [a for a in alarms if (a["Namespace"], a["MetricName"]) == (namespace, metric)
                     and endpoint in json.dumps(a["Dimensions"])]
            assert len(found) == 1, f"{name} {endpoint}: {metric} alarms {len(found)}"
            a, = found
            dims = {d["Name"]: d["Value"] for d in a["Dimensions"]}
            assert sorted(dims) == sorted(fact["dimensions"]) and dims["VariantName"] == variant, dims
            assert a["Statistic"] in fact["statistics"] and a["Threshold"] == 0
            assert a["ComparisonOperator"] == "GreaterThanThreshold" and a["EvaluationPeriods"] == 1
            assert a["AlarmActions"] and a["OKActions"] and a["TreatMissingData"] == "notBreaching"
            assert ("ended Succeeded" in a["AlarmDescription"]) == drained, a["AlarmDescription"]


@pytest.mark.parametrize("name", ["huge", "intermediate", "small-all-kinds"])
def test_every_async_endpoint_alarms_when_its_oldest_request_outlives_the_start_up_allowance(name,
                                                                                             variant_synth_by_name):
    """A scale-from-zero that never comes up (no quota, no capacity, a failed health check) leaves requests in the
    queue until their TTL: ExpiredRequests says so hours later (R6 F7). metrics.yaml async_stuck_alarm:
    ApproximateAgeOfOldestRequest (seconds, EndpointName only), Maximum above the plan's start-up allowance (model
    download + healthy within) plus SCALE_OUT_MARGIN_S, the allowance stated in the description."""
    from workloads.planning.monitoring import SCALE_OUT_MARGIN_S, drain_seconds
    res, asyncs, inference = _async_endpoints(name, variant_synth_by_name)
    st = inference["async"].startup
    batch = inference.get("batch")
    # The nightly drain's records wait in the queue while a healthy fleet processes them: that time is allowed too.
    drain = math.ceil(drain_seconds(inference)) if batch is not None and batch.serving is not None \
        and batch.serving.drain == "async" else 0
    key = metric_facts()["async_stuck_alarm"]
    namespace, metric = key.split(":")
    fact = FACTS[key]
    assert fact["unit"] == "Seconds" and fact["dimensions"] == ["EndpointName"]
    alarms = [r["Properties"] for r in res.values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    for endpoint in asyncs:
        found = [a for a in alarms if (a["Namespace"], a["MetricName"]) == (namespace, metric)
                 and endpoint in json.dumps(a["Dimensions"])]
        assert len(found) == 1, f"{name} {endpoint}: {metric} alarms {len(found)}"
        a, = found
        assert [d["Name"] for d in a["Dimensions"]] == ["EndpointName"]
        assert a["Statistic"] == "Maximum" and a["Statistic"] in fact["statistics"]
        allowance = st.download_timeout_s + st.startup_timeout_s
        assert a["Threshold"] == allowance + drain + SCALE_OUT_MARGIN_S and \
            a["ComparisonOperator"] == "GreaterThanThreshold"
        assert (f"plus {drain} s the nightly drain" in a["AlarmDescription"]) == bool(drain)
        assert f"{st.download_timeout_s} s model download + {st.startup_timeout_s} s healthy within" \
            in a["AlarmDescription"] and str(SCALE_OUT_MARGIN_S) in a["AlarmDescription"]
        assert a["AlarmActions"] and a["TreatMissingData"] == "notBreaching"
