"""Custom::ArtifactCheck: fail the deploy in seconds when a model artifact is not in the bucket.

The Lambda's inline code (standard library and boto3 only); the emulator runs missing() in-process.
"""

import json
import urllib.request

RESOURCE_TYPE = "Custom::ArtifactCheck"
# HeadObject without s3:ListBucket answers an absent key 403, not 404 (S3 API Reference, HeadObject, Permissions).
ABSENT = {"404", "NoSuchKey", "NotFound", "403", "AccessDenied", "Forbidden"}


def missing(s3, bucket, artifacts):
    """One line naming each missing object and how to put it there; None when all are there.
    `artifacts`: [{"Key": the object to find, "Put": how to upload it}]."""
    lines = []
    for a in artifacts:
        try:
            s3.head_object(Bucket=bucket, Key=a["Key"])
        except Exception as e:  # botocore's ClientError; the emulator passes its own client
            code = str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))
            why = "is missing" if code in ABSENT else f"could not be checked ({e})"
            lines.append(f"s3://{bucket}/{a['Key']} {why}: {a['Put']}")
    if not lines:
        return None
    return "Model artifact not uploaded, so no endpoint is created: " + "; ".join(lines)


def handler(event, context):
    reason = None
    try:
        if event["RequestType"] in ("Create", "Update"):
            import boto3
            from botocore.config import Config

            # Seconds, not minutes: an unreachable S3 still ends in a reply well inside the function's timeout.
            s3 = boto3.client("s3", config=Config(connect_timeout=5, read_timeout=10,
                                                  retries={"max_attempts": 2}))
            p = event["ResourceProperties"]
            reason = missing(s3, p["Bucket"], p["Artifacts"])
    except Exception as e:  # CloudFormation waits an hour for a reply that never comes: always reply
        reason = f"Artifact check failed: {e}"
    print(reason or "All model artifacts are in the bucket")  # the function's log
    _reply(event, reason)


def _reply(event, reason):
    body = json.dumps({
        "Status": "FAILED" if reason else "SUCCESS",
        "Reason": " ".join((reason or "All model artifacts are in the bucket").split())[:3000],
        "PhysicalResourceId": event.get("PhysicalResourceId") or event["LogicalResourceId"],
        "StackId": event["StackId"], "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"], "Data": {},
    }).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    urllib.request.urlopen(request, timeout=10).close()
