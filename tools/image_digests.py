"""The digest behind each container image tag a deploy of the plan pulls, read from ECR and recorded.

    python -m tools.image_digests intermediate -c inference.realtime.instance_type=ml.g5.2xlarge
    python -m tools.image_digests -c teams=config/teams.yaml -c team=vision

AWS publishes its Deep Learning Containers by tag only: the release notes and the image data of
aws/deep-learning-containers list URIs and tags, no digest (workloads/catalog/serving_images.yaml, `digests`). A tag
can be moved to a rebuilt image (the DLCs are patched in place), so what a tag means is read where it lives: ECR's
BatchGetImage, the call a pull makes, answers the manifest's digest for the tag in the plan's region. Each image is
reported as `URI is sha256:... (read DATE)` and recorded in workloads/catalog/image_digests.yaml with the date and the
caller that read it (sts:GetCallerIdentity); synthesis then deploys it as IMAGE@DIGEST, the tag kept beside it
(workloads/commands/image_pins.py). A tag the registry does not answer is an ERROR and records nothing. SageMaker
reports what an endpoint pulled (DescribeEndpoint DeployedImages[].ResolvedImage), to compare with what was read.
"""

from __future__ import annotations

import re
from datetime import datetime

from workloads.errors import ERROR, INFO, Finding

# ACCOUNT.dkr.ecr.REGION.amazonaws.com[.cn]/REPOSITORY:TAG (ECR User Guide, "Pulling an image").
_URI = re.compile(r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/"
                  r"(?P<repository>[^:@]+):(?P<tag>[^@]+)$")
# What a pull accepts (ECR API Reference, BatchGetImage acceptedMediaTypes): manifest lists and OCI indexes too.
MEDIA_TYPES = ["application/vnd.docker.distribution.manifest.v2+json",
               "application/vnd.docker.distribution.manifest.list.v2+json",
               "application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.index.v1+json"]


def parse(uri: str) -> dict[str, str] | None:
    found = _URI.match(uri)
    return found.groupdict() if found else None


def image_digests(images: list[str], ecr, now: datetime, *, pins: list | None = None) -> list[Finding]:
    """One finding per distinct image; `ecr` is a client in the plan's region, where its images' registries are.
    `pins`: where given, each digest read is appended to it as an image_pins.Pin (read_by left empty)."""
    from workloads.commands.image_pins import Pin

    findings = []
    for uri in dict.fromkeys(images):
        parts = parse(uri)
        if parts is None:  # a digest already, or not an ECR image: nothing to resolve
            continue
        try:
            answer = ecr.batch_get_image(
                registryId=parts["account"], repositoryName=parts["repository"], imageIds=[{"imageTag": parts["tag"]}],
                acceptedMediaTypes=MEDIA_TYPES)
        except ecr.exceptions.RepositoryNotFoundException as exc:
            answer = {"failures": [{"failureCode": "RepositoryNotFound", "failureReason": exc.response["Error"].get(
                "Message", "")}]}
        digests = {i["imageId"].get("imageDigest") for i in answer.get("images", [])} - {None}
        if len(digests) == 1:
            digest, = digests
            findings.append(Finding(INFO, "image_digest", f"{parts['repository']}:{parts['tag']}",
                                    f"{uri} is {digest} (read {now:%Y-%m-%d %H:%M} UTC); pin it as "
                                    f"{uri.rsplit(':', 1)[0]}@{digest} to deploy exactly this image"))
            if pins is not None:
                pins.append(Pin(uri.rsplit(":", 1)[0], parts["tag"], digest, f"{now:%Y-%m-%dT%H:%M:%SZ}", ""))
            continue
        why = "; ".join(f"{f.get('failureCode')}: {f.get('failureReason')}" for f in answer.get("failures", [])) \
            or f"{len(digests)} digests answered"
        findings.append(Finding(ERROR, "image_digest", f"{parts['repository']}:{parts['tag']}",
                                f"{uri} is not answered by its registry ({why}): the endpoint or job could not pull it"))
    return findings


def main(argv: list[str] | None = None, *, session=None) -> int:
    """`python -m tools.image_digests WORKLOAD [-c KEY=VALUE ...]` (or `-c teams=FILE -c team=NAME`): each image the
    deploy pulls, with the digest its tag names now, from the caller's account (ecr:BatchGetImage), recorded in
    workloads/catalog/image_digests.yaml. Exit 1 if one is not answered. `session`: a boto3 session (tests)."""
    import sys
    from dataclasses import replace
    from datetime import timezone

    import boto3

    from constructs_lib.images import plan_images

    from workloads import ConfigError
    from workloads.commands import image_pins
    from workloads.config.loader import load
    from workloads.errors import report
    from workloads.planning.planner import plan
    from workloads.planning.teams import load_teams

    args = sys.argv[1:] if argv is None else argv
    workload = args[0] if args and not args[0].startswith("-") else None
    rest = args[1:] if workload else args
    overrides = dict(a.split("=", 1) for a in rest[1::2] if "=" in a)
    try:
        if workload is None and {"teams", "team"} <= set(overrides):
            p = load_teams(overrides["teams"], only=overrides["team"])[0].plan
        elif workload is None:
            raise IndexError
        else:
            p = plan(load(workload, overrides))
    except (ConfigError, IndexError) as exc:
        if isinstance(exc, IndexError):
            print("usage: python -m tools.image_digests WORKLOAD [-c KEY=VALUE ...] | -c teams=FILE -c team=NAME",
                  file=sys.stderr)
        else:
            report(exc)
        return 2
    session = session or boto3.session.Session()
    read: list = []
    found = image_digests(plan_images(p), session.client("ecr", region_name=p.workload.region),
                          datetime.now(timezone.utc), pins=read)
    for f in found:
        print(f"{f.level} {f.value}: {f.message}")
    if read:
        caller = session.client("sts", region_name=p.workload.region).get_caller_identity()["Arn"]
        image_pins.record([replace(pin, read_by=caller) for pin in read])
        print(f"recorded {len(read)} digest(s) in {image_pins.RECORD.relative_to(image_pins.RECORD.parents[2])}: "
              "synthesis deploys those images by digest")
    return 1 if any(f.level == ERROR for f in found) else 0


if __name__ == "__main__":
    raise SystemExit(main())
