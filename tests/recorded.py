"""Recorded AWS answers for the APIs the local emulator (moto 5.2) does not serve: Service Quotas, Cost Explorer's
cost allocation tags, EC2 capacity reservations; and Cost Explorer's costs (tests/fixtures/cost/), which moto answers
only with what a test gives it.

Each fixture under tests/fixtures/preflight/ (or the folder given) names its `source` (the API reference page whose response syntax it
follows) and lists `calls`: an operation, the request parameters it answers (a subset), and the response or the
error. `replay(client, ...)` answers those operations from the fixtures before any request is sent (botocore's
before-call event, as its Stubber does); every recorded response is first checked against the operation's output
shape in botocore's model, and its timestamps are parsed as botocore parses them, so a fixture cannot drift from
the real API's shape. A call no fixture answers fails the test with the call it was.
"""

from __future__ import annotations

import json
from pathlib import Path

from botocore.awsrequest import AWSResponse
from botocore.utils import parse_timestamp
from botocore.validate import ParamValidator

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "preflight"
COST_FIXTURES = FIXTURES.parent / "cost"
_PARAMS = "recorded_params"


def load_fixture(name: str, folder: Path = FIXTURES) -> dict:
    data = json.loads((folder / f"{name}.json").read_text())
    assert data["source"].startswith("https://docs.aws.amazon.com/"), f"{name}: the source is the API reference page"
    return data


def _typed(shape, value):
    """The response as botocore's parser returns it: timestamps as datetimes."""
    if shape is None:
        return value
    if shape.type_name == "structure":
        return {k: _typed(shape.members.get(k), v) for k, v in value.items()}
    if shape.type_name == "list":
        return [_typed(shape.member, v) for v in value]
    if shape.type_name == "map":
        return {k: _typed(shape.value, v) for k, v in value.items()}
    if shape.type_name == "timestamp":
        return parse_timestamp(value)
    return value


def _checked(client, call: dict) -> dict:
    operation = client.meta.service_model.operation_model(call["operation"])
    if "error" in call:
        return call
    response = _typed(operation.output_shape, call["response"])
    report = ParamValidator().validate(response, operation.output_shape)
    assert not report.has_errors(), f"{call['operation']}: the recorded response is not the API's shape:\n" \
                                    f"{report.generate_report()}"
    return {**call, "response": response}


def checked_response(client, call: dict) -> dict:
    """A recorded call's response as botocore would parse it, after checking it against the operation's shape."""
    return _checked(client, call)["response"]


def replay(client, *names: str, every_call: bool = True, folder: Path = FIXTURES):
    """Answer the client's calls from the fixtures `names`. `every_call`: every operation of the service must be
    recorded (False: only the recorded operations are answered here, the others go to the emulator)."""
    calls = [_checked(client, c) for name in names for c in load_fixture(name, folder)["calls"]]
    service = client.meta.service_model.service_id.hyphenize()

    def remember(params, context, **_):
        context[_PARAMS] = dict(params)

    def answer(model, context, **_):
        params = context.get(_PARAMS, {})
        for c in calls:
            if c["operation"] == model.name and all(params.get(k) == v for k, v in c.get("params", {}).items()):
                if "error" in c:
                    status = c.get("status", 400)
                    return AWSResponse(None, status, {}, None), {"Error": c["error"],
                                                                 "ResponseMetadata": {"HTTPStatusCode": status}}
                return AWSResponse(None, 200, {}, None), {**c["response"],
                                                          "ResponseMetadata": {"HTTPStatusCode": 200}}
        raise AssertionError(f"no recorded answer for {service} {model.name} {params} in {names}")

    operations = [""] if every_call else sorted({f".{c['operation']}" for c in calls})
    for op in operations:
        client.meta.events.register(f"before-parameter-build.{service}{op}", remember)
        client.meta.events.register(f"before-call.{service}{op}", answer)
    return client
