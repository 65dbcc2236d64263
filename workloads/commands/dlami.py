"""The node image's parent: the newest DLAMI of a pinned release, found by ec2:DescribeImages at deploy time.

Neuron publishes SSM parameters for its latest DLAMI only, and `latest` moves: the day it names the next release,
a bake pinned to this one fails after 30-45 minutes. A release's DLAMI is found by owner and name, its release read
in the description (Neuron DLAMI User Guide, "Finding a DLAMI for a specific Neuron SDK version",
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/deploy/environments/dlami.html).

One rule, two callers: `python -m workloads preflight` (workloads/commands/preflight.py neuron_dlami_release) and the
node image's deploy-time custom resource (constructs_lib/parent_image.py), whose Lambda runs THIS FILE as its
inline code: so it imports the standard library only (and boto3, in the handler, as the Lambda runtime has it).
"""

import json
import urllib.request

RESOURCE_TYPE = "Custom::ParentImage"


def newest_parent(images, marker):
    """The newest image (by CreationDate) whose description names the release (`marker`; None: any), or None."""
    ours = [i for i in images if marker is None or marker in (i.get("Description") or "")]
    ours.sort(key=lambda i: str(i.get("CreationDate", "")), reverse=True)
    return ours[0] if ours else None


def release_of(description):
    """The Neuron release a DLAMI's description names ("... Neuron SDK 2.33.0. ..." -> "2.33.0"), or ""."""
    words = description.split("Neuron SDK ", 1)
    return words[1].split()[0].rstrip(",.;)") if len(words) == 2 and words[1] else ""


def not_found(query, marker, region, images):
    """One line naming the release, what the region has instead, what to change and the query."""
    name, owner = query["Filters"][0]["Values"][0], query["Owners"][0]
    of = f" of {marker.rstrip('.')}" if marker else ""
    releases = sorted({release_of(i.get("Description") or "") for i in images} - {""})
    seen = f"; the region has {name} images of Neuron {', '.join(releases)}" if releases else ""
    fix = ("update the pins and neuron_release in workloads/catalog/software.yaml together" if marker else
           "update parent_dlami in workloads/catalog/software.yaml")
    return (f"no {name} image{of} owned by {owner} in {region}{seen}: the node image bake cannot start; {fix} "
            f"(DescribeImages {json.dumps(query, sort_keys=True)})")


def resolve(ec2, query, marker, region):
    """(image, None) or (None, the reason): DescribeImages with the query, newest image of the release."""
    images = ec2.describe_images(**query).get("Images", [])
    image = newest_parent(images, marker)
    return (image, None) if image else (None, not_found(query, marker, region, images))


def handler(event, context):
    reason, data = None, {}
    try:
        if event["RequestType"] in ("Create", "Update"):
            import boto3
            from botocore.config import Config

            p = event["ResourceProperties"]
            ec2 = boto3.client("ec2", config=Config(connect_timeout=5, read_timeout=20,
                                                    retries={"max_attempts": 3}))
            image, reason = resolve(ec2, p["Query"], p.get("Marker") or None, ec2.meta.region_name)
            if image:
                data = {"ImageId": image["ImageId"], "Name": image.get("Name", "")}
    except Exception as e:  # CloudFormation waits an hour for a reply that never comes: always reply
        reason = f"Parent image lookup failed: {e}"
    print(reason or f"Parent image {data}")  # the function's log
    _reply(event, reason, data)


def _reply(event, reason, data):
    body = json.dumps({
        "Status": "FAILED" if reason else "SUCCESS",
        "Reason": " ".join((reason or f"Parent image {data.get('ImageId')}").split())[:3000],
        # The image is the resource: a new one (the pins moved) replaces it, and the recipe with it.
        "PhysicalResourceId": data.get("ImageId") or event.get("PhysicalResourceId") or event["LogicalResourceId"],
        "StackId": event["StackId"], "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"], "Data": data,
    }).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    urllib.request.urlopen(request, timeout=10).close()
