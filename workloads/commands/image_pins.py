"""Images pinned by digest beside their tag, as read from ECR and recorded in workloads/catalog/image_digests.yaml.

`python -m tools.image_digests WORKLOAD` reads the digest each of the plan's tags names now (ecr:BatchGetImage) and
records it here with the date and the reader; synthesis deploys a recorded image as IMAGE@DIGEST (`pinned`), and where
none is recorded, `python -m workloads plan` and `cdk synth` carry one WARNING naming the images deployed by tag only.
A tag can be moved to a rebuilt image (AWS patches its DLCs in place); SageMaker resolves the tag once, when it
creates the endpoint, and reports what it pulled (DescribeEndpoint ProductionVariants[].DeployedImages[]
.ResolvedImage, "the specific digest path of the image hosted in this ProductionVariant": SageMaker API Reference,
DeployedImage, read in botocore 1.44.5's sagemaker model), so a redeploy or a scale-out after a tag moved may run
another image than the one tested: pinning makes that explicit. Pure Python: no SDK, no CDK.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import WARNING, Finding
from ..packaged import read_packaged_yaml
from . import image_cache

if TYPE_CHECKING:
    from ..planning.planner import Plan

RECORD = Path(__file__).resolve().parent.parent / "catalog" / "image_digests.yaml"
COMMAND = "python -m tools.image_digests"
SOURCE = ("Amazon ECR API Reference, BatchGetImage (imageId.imageDigest for an imageTag); SageMaker API Reference, "
          "DeployedImage (ResolvedImage): https://docs.aws.amazon.com/sagemaker/latest/APIReference/"
          "API_DeployedImage.html")


@dataclass(frozen=True)
class Pin:
    """An image tag's digest as read from ECR, with when and by whom."""
    image: str  # the repository URI, without tag: ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPOSITORY
    tag: str
    digest: str  # sha256:...
    read_at: str  # ISO 8601, UTC
    read_by: str  # the caller that read it (sts:GetCallerIdentity Arn)


def split(uri: str) -> tuple[str, str | None]:
    """(repository URI, tag) of IMAGE:TAG; (uri, None) for a URI without a tag (or by digest)."""
    name = uri.rsplit("/", 1)[-1]
    if "@" in uri or ":" not in name:
        return uri, None
    image, tag = uri.rsplit(":", 1)
    return image, tag


def load_pins(path: Path | None = None) -> dict[tuple[str, str], Pin]:
    path = path or RECORD
    data = read_packaged_yaml(path) if path.exists() else None  # no yaml import where its parse is cached
    return {(p.image, p.tag): p for p in (Pin(**{k: str(v) for k, v in e.items()}) for e in (data or {}).get(
        "images") or [])}


def pinned(uri: str, path: Path | None = None) -> tuple[str, str | None]:
    """(what to deploy, the tag it was read for): IMAGE@DIGEST and TAG where a digest is recorded, else (uri, None)."""
    image, tag = split(uri)
    pin = load_pins(path).get((image, tag)) if tag else None
    return (f"{image}@{pin.digest}", tag) if pin else (uri, None)


def record(pins: list[Pin], path: Path | None = None) -> None:
    """Add or replace these entries (by image and tag), keeping the file's header comment; written atomically."""
    import yaml

    path = path or RECORD
    known = {**load_pins(path), **{(p.image, p.tag): p for p in pins}}
    text = path.read_text() if path.exists() else ""
    header = "".join(line for line in text.splitlines(keepends=True) if line.startswith("#"))
    body = yaml.safe_dump({"images": [p.__dict__ for _, p in sorted(known.items())]}, sort_keys=False, width=120)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # a reader never sees half a file
    tmp.write_text(header + body)
    os.replace(tmp, path)


def by_tag_only(images: list[str], path: Path | None = None) -> list[str]:
    """The images of `images` that would be deployed by tag: no digest recorded for them."""
    return [uri for uri in dict.fromkeys(images) if split(uri)[1] and pinned(uri, path)[1] is None]


def offline_images(p: Plan) -> tuple[list[str], list[str]]:
    """(the plan's image URIs, the containers whose URI is not written down yet), without importing the SDK."""
    from .images import job_tags, serving_image

    uris, unknown = [], []
    with image_cache.offline():
        for ip in p.inference.values():
            if ip.serving is not None:
                try:
                    uris.append(serving_image(container=ip.serving.container, region=p.workload.region,
                                              instance_type=ip.instance_type))
                except LookupError:
                    unknown.append(ip.serving.container)
        try:
            uris += job_tags(p)
        except LookupError:
            unknown.append("the SageMaker jobs' images")
    return uris, unknown


def pin_finding(p: Plan, *, workload_args: str, path: Path | None = None) -> Finding | None:
    """One WARNING naming the plan's images deployed by tag only, and the command that pins them; None if all are."""
    uris, unknown = offline_images(p)
    loose = [*by_tag_only(uris, path), *dict.fromkeys(unknown)]
    if not loose:
        return None
    return Finding(WARNING, "images", len(loose), (
        f"{len(loose)} image{'s are' if len(loose) != 1 else ' is'} deployed by tag only, no digest recorded "
        f"({', '.join(u.rsplit('/', 1)[-1] for u in loose)}): a tag can be moved to a rebuilt image, and SageMaker "
        "resolves it to a digest only when it creates the endpoint (DescribeEndpoint DeployedImages ResolvedImage). "
        f"`{COMMAND} {workload_args}`, with credentials, reads each tag's digest from ECR (ecr:BatchGetImage) into "
        "workloads/catalog/image_digests.yaml; synthesis then deploys those images by digest").replace("  ", " "),
        SOURCE)


def with_pin_finding(p: Plan, *, workload_args: str, path: Path | None = None) -> Plan:
    found = pin_finding(p, workload_args=workload_args, path=path)
    return replace(p, findings=(*p.findings, found)) if found else p
