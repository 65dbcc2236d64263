"""Rules that need the instance catalog or several fields: one small function per rule.

Each ERROR rule raises a ConfigError that says what to change; `check` runs them in order and refuses with every
broken one. ADVICE rules return WARNING or INFO findings for a config that can be built (`advice` runs them): the
plan, the JSON and `cdk synth` show them, and --strict / -c strict=true refuses them too.
"""

from __future__ import annotations

from collections.abc import Callable

from ..catalog import ML_PREFIX, Catalog, InstanceType, is_zone_id, load_catalog
from ..catalog.sagemaker_apis import INFERENCE_API, ORCHESTRATOR_API, load_sagemaker_apis
from ..errors import WARNING, ConfigError, Finding, raise_all
from . import model
from .ignored import ignored_fields
from .schema import CLASSIC_ML, SERVERLESS_MAX_MB, Workload


def region_is_known(w: Workload, cat: Catalog) -> None:
    if w.region not in cat.regions:
        raise ConfigError("region", w.region, ", ".join(cat.regions), reason="not a region the catalog covers")


def _zones_allowed(w: Workload, cat: Catalog, *, other_than: str | None = None) -> str:
    names = ", ".join(w.region + letter for letter in cat.regions[w.region] if w.region + letter != other_than)
    return f"{names}, or an AZ ID such as {cat.zone_id_pattern(w.region)} (the same physical zone in every account)"


def zone_is_in_region(w: Workload, cat: Catalog) -> None:
    if w.region not in cat.regions:  # region_is_known reports it; the zones cannot be known
        return
    zone = w.availability_zone
    named = zone.startswith(w.region) and zone.removeprefix(w.region) in cat.regions[w.region]
    if not (named or cat.is_zone_id_of(zone, w.region)):
        raise ConfigError("availability_zone", zone, _zones_allowed(w, cat), reason=f"not a zone of region {w.region}")


def second_zone_is_another_zone_of_the_region(w: Workload, cat: Catalog) -> None:
    """A zone name and an AZ ID cannot be compared offline (names map to zones per account): both zones are written
    the same way. With an AZ ID the second zone is named too: the catalog knows zone letters, not which AZ IDs exist."""
    first, second = w.availability_zone, w.second_availability_zone
    if w.region not in cat.regions:  # region_is_known reports an unknown region
        return
    by_id = is_zone_id(first)
    if second is None:
        if by_id:
            raise ConfigError("second_availability_zone", None, f"another AZ ID of {w.region}, e.g. "
                              f"{cat.zone_id_pattern(w.region)}", reason="required when availability_zone is an AZ ID "
                              "(synthesis makes no lookups, so it cannot choose the hosted endpoints' second zone)")
        return
    if is_zone_id(second) != by_id:
        raise ConfigError("second_availability_zone", second, f"an {'AZ ID' if by_id else 'zone name'} like "
                          f"availability_zone {first}", reason="one zone is a name and the other an AZ ID: names map "
                          "to zones per account, so synthesis cannot tell whether they are two zones")
    others = [w.region + letter for letter in cat.regions[w.region] if w.region + letter != first]
    valid = cat.is_zone_id_of(second, w.region) if by_id else second in others
    if second == first or not valid:
        why = "the same zone as availability_zone" if second == first else f"not a zone of region {w.region}"
        allowed = f"another AZ ID of {w.region}, e.g. {cat.zone_id_pattern(w.region)}" if by_id else ", ".join(others)
        raise ConfigError("second_availability_zone", second, allowed,
                          reason=f"{why}; hosted endpoints need subnets in two zones of the region")


def hosting_zones(w: Workload, cat: Catalog) -> tuple[str, str]:
    """The two zones of the hosted endpoints' subnets: availability_zone first, then second_availability_zone or
    the region's first other zone in the catalog (AWS "Regions and Availability Zones", catalog/regions.yaml)."""
    if w.second_availability_zone:
        return w.availability_zone, w.second_availability_zone
    letters = cat.regions.get(w.region, ())
    other = None if is_zone_id(w.availability_zone) else \
        next((w.region + l for l in letters if w.region + l != w.availability_zone), None)
    if other is None:
        raise ConfigError("second_availability_zone", None, "another zone of the region",
                          reason=f"the catalog lists no second zone for {w.region}")
    return w.availability_zone, other


def _known_type(field: str, name: str, cat: Catalog, *, sagemaker: bool, api: str = "") -> InstanceType:
    """The catalog's type; on SageMaker (`api`: the enum of botocore's model that takes it) one that API lists and the
    catalog prices."""
    itype = cat.get(name)
    if itype is None:
        family = name.removeprefix(ML_PREFIX).split(".")[0]
        kin = sorted((t.name for t in cat.types.values() if t.family == family and (t.on_sagemaker or not sagemaker)),
                     key=lambda n: (cat.types[n].vcpus, n))
        if kin:  # a known family: its types are what was meant (t3.xlarge -> t3.medium)
            prefix = ML_PREFIX if name.startswith(ML_PREFIX) else ""
            raise ConfigError(field, name, f"the catalog's {family} types: " + ", ".join(prefix + n for n in kin),
                              reason="not in the instance catalog")
        families = sorted({t.family for t in cat.types.values()})
        raise ConfigError(field, name, "types of the families " + ", ".join(families) + " (python -m workloads catalog)",
                          reason="not in the instance catalog")
    if api and (why := load_sagemaker_apis().refusal(api, itype.name)):
        listed = sorted(n for n in load_sagemaker_apis().types[api] if cat.types[n].on_sagemaker)
        raise ConfigError(field, name, "the catalog's types it lists: " + ", ".join(ML_PREFIX + n for n in listed),
                          reason=why)
    if sagemaker and not itype.on_sagemaker:
        raise ConfigError(field, name, "types with a recorded SageMaker price (python -m workloads catalog)",
                          reason="the catalog records no SageMaker price for it, so it cannot be costed")
    return itype


def _offered_in_region(field: str, itype: InstanceType, w: Workload) -> None:
    if w.region not in itype.regions:
        raise ConfigError(field, itype.name, "regions " + ", ".join(itype.regions),
                          reason=f"not offered in region {w.region}")


def training_type_is_known(w: Workload, cat: Catalog) -> None:
    if w.training.instance_type is None:
        return
    itype = _known_type("training.instance_type", w.training.instance_type, cat, sagemaker=False)
    _offered_in_region("training.instance_type", itype, w)


def classic_ml_trains_on_cpu(w: Workload, cat: Catalog) -> None:
    if w.model.framework not in CLASSIC_ML or w.training.instance_type is None:
        return
    itype = cat.get(w.training.instance_type)
    if itype is not None and itype.accelerated:
        cpu = sorted({t.family for t in cat.types.values() if not t.accelerated})
        raise ConfigError("training.instance_type", w.training.instance_type, "CPU families " + ", ".join(cpu),
                          reason=f"{w.model.framework} trains on CPU, not on an accelerator")


def scikit_learn_is_single_node(w: Workload, cat: Catalog) -> None:
    if w.model.framework == "scikit-learn" and (w.training.instance_count or 1) > 1:
        raise ConfigError("training.instance_count", w.training.instance_count, "1",
                          reason="scikit-learn does not distribute training across instances")


CLUSTER_ORCHESTRATORS = ("slurm", "hyperpod")


def training_type_can_train(w: Workload, cat: Catalog) -> None:
    itype = cat.get(w.training.instance_type) if w.training.instance_type else None
    if itype is None:
        return
    if itype.accelerator and itype.accelerator.kind == "inferentia":
        raise ConfigError("training.instance_type", itype.name, "trn1, trn1n, trn2, p4d, p5, g5, g6 or CPU types",
                          reason="Inferentia is an inference accelerator; it does not train")


def burstable_types_do_not_train_well(w: Workload, cat: Catalog) -> list[Finding]:
    """A t3 trains, but on CPU credits: once they are spent it runs at its baseline (a fraction of a vCPU)."""
    itype = cat.get(w.training.instance_type) if w.training.instance_type else None
    if itype is None or itype.family != "t3":
        return []
    return [Finding(WARNING, "training.instance_type", itype.name, "burstable t3 runs at its baseline CPU share once "
                    "its CPU credits are spent, so a long training run slows down; c5, c6i, m5 or r5 hold their "
                    "speed", "Amazon EC2 User Guide, \"Burstable performance instances\" "
                    "<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/burstable-performance-instances.html>")]


def listed_kinds_are_not_served(w: Workload, cat: Catalog) -> list[Finding]:
    """inference.serve false with kinds listed (a preset's, `-c inference.serve=false`): training only wins."""
    listed = w.inference.listed()
    if w.inference.serve or not listed:
        return []
    return [Finding(WARNING, "inference.serve", False, f"training only: the listed {', '.join(listed)} "
                    "is not planned or deployed; remove inference.serve: false to serve it")]


def cluster_networking_needs_efa(w: Workload, cat: Catalog) -> None:
    t = w.training
    itype = cat.get(t.instance_type) if t.instance_type else None
    if itype is None or t.orchestrator not in CLUSTER_ORCHESTRATORS or (t.instance_count or 1) < 2:
        return
    if itype.efa_max_interfaces == 0:
        efa = sorted(n for n, x in cat.types.items() if x.efa_max_interfaces > 0 and x.accelerated)
        raise ConfigError("training.instance_type", itype.name, "EFA types such as " + ", ".join(efa[:8]),
                          reason=f"a {t.instance_count}-node {t.orchestrator} cluster needs EFA; this type has none")


def capacity_reservation_is_complete(w: Workload, cat: Catalog) -> None:
    t = w.training
    if t.capacity_reservation_id and not t.capacity_reservation_az:
        raise ConfigError("training.capacity_reservation_az", None, f"the reservation's AZ, e.g. {w.availability_zone}",
                          reason="required with capacity_reservation_id (synthesis makes no lookups)")
    if t.capacity_block and not t.capacity_reservation_id:
        raise ConfigError("training.capacity_block", True, "a capacity_reservation_id of the Capacity Block",
                          reason="a Capacity Block is used through its reservation ID")


def capacity_reservation_in_cluster_az(w: Workload, cat: Catalog) -> None:
    az = w.training.capacity_reservation_az
    if az and is_zone_id(az) != is_zone_id(w.availability_zone):
        return  # a name and an AZ ID: only the account maps one to the other (preflight compares the reservation's)
    if w.training.capacity_reservation_id and az != w.availability_zone:
        raise ConfigError("training.capacity_reservation_az", az, w.availability_zone,
                          reason="the reservation must be in the cluster's AZ (cluster, FSx and reservation share one AZ)")


def orchestrator_supports_type(w: Workload, cat: Catalog) -> None:
    """A HyperPod group or training job of a type its API's enum does not list (botocore's model) is refused."""
    itype = cat.get(w.training.instance_type) if w.training.instance_type else None
    api = ORCHESTRATOR_API.get(w.training.orchestrator or "")
    if itype is None or api is None or not (why := load_sagemaker_apis().refusal(api, itype.name)):
        return
    others = [o for o, a in ORCHESTRATOR_API.items() if o != w.training.orchestrator
              and load_sagemaker_apis().takes(a, itype.name)]
    raise ConfigError("training.orchestrator", w.training.orchestrator, " or ".join([*others, "slurm (EC2)"]) +
                      " for this type", reason=why)


def training_plan_needs_hyperpod(w: Workload, cat: Catalog) -> None:
    """A training plan is used by a HyperPod instance group or a training job's ResourceConfig (TrainingPlanArn),
    never by a Slurm cluster on EC2."""
    if w.training.training_plan_arn and w.training.orchestrator not in ("hyperpod", "sagemaker-jobs"):
        raise ConfigError("training.orchestrator", w.training.orchestrator, "hyperpod or sagemaker-jobs",
                          reason="a training plan reserves capacity for a HyperPod worker group or training jobs")


def training_plan_in_the_region(w: Workload, cat: Catalog) -> None:
    """A training plan reserves capacity in its own region (its ARN's): a cluster or job elsewhere cannot use it, and
    CreateCluster or CreateTrainingJob refuses the ARN."""
    arn = w.training.training_plan_arn
    region = arn.split(":")[3] if arn else ""
    if arn and region != w.region:
        raise ConfigError("training.training_plan_arn", arn, f"a training plan bought in {w.region} (the workload's "
                          "region)", reason=f"the plan is in {region or 'no region'}, the cluster in {w.region}: a "
                          "plan reserves capacity in its own region only")


def notebook_type_is_known(w: Workload, cat: Catalog) -> None:
    if w.notebook is not None:
        itype = _known_type("notebook.instance_type", w.notebook.instance_type, cat, sagemaker=True,
                            api="InstanceType")
        _offered_in_region("notebook.instance_type", itype, w)


def inference_types_are_known(w: Workload, cat: Catalog) -> None:
    inf = w.inference
    for kind, section in (("realtime", inf.realtime), ("async", inf.async_), ("batch", inf.batch)):
        if section is None or section.instance_type is None:
            continue
        field = f"inference.{kind}.instance_type"
        if not section.instance_type.startswith(ML_PREFIX):
            raise ConfigError(field, section.instance_type, f"the SageMaker form, e.g. ml.{section.instance_type}",
                              reason="inference types are SageMaker types")
        itype = _known_type(field, section.instance_type, cat, sagemaker=True, api=INFERENCE_API[kind])
        _offered_in_region(field, itype, w)


def _fits_serverless(w: Workload, memory_mb: int) -> bool:
    return model.serving_fits(w.model.parameters_billion, memory_mb / 1024, model.CPU_BYTES_PER_PARAM)


def serverless_holds_the_model(w: Workload, cat: Catalog) -> None:
    """Serverless is CPU only: fp32 weights must fit the endpoint's memory. A model too big for the largest memory is
    refused on the section (no memory_mb would do); otherwise memory_mb names the sizes that hold it."""
    s = w.inference.serverless
    if s is None or _fits_serverless(w, s.memory_mb):
        return
    reason = f"a {w.model.parameters_billion:g}B-parameter model does not fit in serverless memory"
    if not _fits_serverless(w, SERVERLESS_MAX_MB):
        raise ConfigError("inference.serverless", _section(s), _NOT_SERVERLESS,
                          reason=f"{reason} ({SERVERLESS_MAX_MB} MB at most)")
    enough = next(mb for mb in range(1024, SERVERLESS_MAX_MB + 1, 1024) if _fits_serverless(w, mb))
    raise ConfigError("inference.serverless.memory_mb", s.memory_mb,
                      f"{', '.join(str(mb) for mb in range(enough, SERVERLESS_MAX_MB + 1, 1024))}; or {_NOT_SERVERLESS}",
                      reason=reason)


_NOT_SERVERLESS = "inference.realtime, inference.async or inference.batch instead"


def _section(section) -> dict:
    """A section as the user wrote it (the fields they set), for an error about the whole section."""
    return section.model_dump(exclude_unset=True, by_alias=True)


_FORMATS_OF_FRAMEWORK = {"pytorch": ("huggingface", "framework-archive"), "tensorflow": ("framework-archive",),
                         "xgboost": ("xgboost",), "scikit-learn": ("scikit-learn",)}


def artifact_format_fits_framework(w: Workload, cat: Catalog) -> None:
    fmt, allowed = w.inference.artifact.format, _FORMATS_OF_FRAMEWORK[w.model.framework]
    if fmt is not None and fmt not in allowed:
        raise ConfigError("inference.artifact.format", fmt, ", ".join(allowed),
                          reason=f"a {w.model.framework} model is not served from a {fmt} artifact")


def artifact_keys_fit_the_format(w: Workload, cat: Catalog) -> None:
    """A Hugging Face directory is an S3 prefix (ends with /); every other artifact is a model.tar.gz."""
    from .model import artifact_format

    fmt, _ = artifact_format(w)
    inf = w.inference
    keys = [("inference.artifact.key", inf.artifact.key)] + [
        (f"inference.{kind}.artifact_key", getattr(section, "artifact_key", None))
        for kind, section in (("realtime", inf.realtime), ("serverless", inf.serverless), ("async", inf.async_),
                              ("batch", inf.batch)) if section is not None]
    for field, key in keys:
        if key is None:
            continue
        if fmt == "huggingface" and not key.endswith("/"):
            raise ConfigError(field, key, "an S3 prefix ending in /, e.g. models/llm/",
                              reason="a Hugging Face model directory is served uncompressed from a prefix")
        if fmt != "huggingface" and not key.endswith(".tar.gz"):
            raise ConfigError(field, key, "a key ending in .tar.gz, e.g. models/model.tar.gz",
                              reason=f"the {fmt} container reads a model.tar.gz")


def architecture_fits_the_model(w: Workload, cat: Catalog) -> None:
    """A decoder is served as an LLM (a Hugging Face directory on an LLM container), never as an encoder archive; the
    LLM containers serve decoders only; classic ML is tabular."""
    from .model import architecture, artifact_format

    kind, _ = architecture(w)
    fmt, _ = artifact_format(w)
    if w.model.framework in CLASSIC_ML and kind != "tabular":
        raise ConfigError("model.architecture", kind, "tabular", reason=f"a {w.model.framework} model is tabular")
    if not w.inference.serve:
        return
    if kind == "decoder" and fmt != "huggingface":
        if w.model.framework != "pytorch":
            raise ConfigError("model.architecture", kind, "encoder, vision or tabular; or a pytorch decoder exported "
                              "as a Hugging Face directory", reason=f"no LLM serving container here reads a "
                              f"{w.model.framework} decoder, and an encoder's sizing would not hold its KV cache")
        raise ConfigError("inference.artifact.format", fmt, "huggingface (or leave it out)",
                          reason="a decoder is served by an LLM container and sized by its KV cache, not as a "
                                 "TorchServe archive sized as an encoder")
    if kind != "decoder" and fmt == "huggingface":
        raise ConfigError("model.architecture", kind, "decoder; or inference.artifact.format framework-archive",
                          reason="the LLM serving containers that read a Hugging Face directory serve decoders")


def decoder_shape_is_consistent(w: Workload, cat: Catalog) -> None:
    from .model import model_shape

    m = w.model
    _, heads, kv_heads, hidden = model_shape(w)
    if m.hidden_size is not None and m.hidden_size % heads:
        raise ConfigError("model.hidden_size", m.hidden_size, f"a multiple of the {heads} attention heads",
                          reason="each head takes hidden_size / attention_heads of it")
    if m.kv_heads is not None and heads % m.kv_heads:
        raise ConfigError("model.kv_heads", m.kv_heads, f"a divisor of the {heads} attention heads",
                          reason="grouped-query attention shares each KV head among a whole number of heads")


def llm_is_not_serverless(w: Workload, cat: Catalog) -> None:
    from .model import artifact_format

    s = w.inference.serverless
    if s is None or artifact_format(w)[0] != "huggingface":
        return
    if not _fits_serverless(w, SERVERLESS_MAX_MB):  # serverless_holds_the_model refuses the section already
        return
    raise ConfigError("inference.serverless", _section(s), f"{_NOT_SERVERLESS}; or inference.artifact.format "
                      "framework-archive", reason="LLM serving containers need a GPU or Inferentia2; serverless "
                      "endpoints are CPU only")


# SageMaker inference limits (SageMaker developer guide: real-time 6 MB / 60 s; serverless
# 4 MB / 60 s; asynchronous 1 GB / 1 hour; batch transform 100 MB per request).
LIMITS = {"realtime": (6, 60), "serverless": (4, 60), "async": (1024, 3600)}
_ALTERNATIVE = {"realtime": "use async (up to 1 GB, 1 hour)", "serverless": "use real-time or async",
                "async": "use batch transform for datasets"}


def inference_limits(w: Workload, cat: Catalog) -> None:
    inf = w.inference
    for kind, section in (("realtime", inf.realtime), ("serverless", inf.serverless), ("async", inf.async_)):
        if section is None:
            continue
        max_mb, max_s = LIMITS[kind]
        if inf.payload_mb > max_mb:
            raise ConfigError("inference.payload_mb", inf.payload_mb, f"at most {max_mb} MB for {kind}; {_ALTERNATIVE[kind]}",
                              reason=f"over the {kind} payload limit")
        if inf.processing_seconds > max_s:
            raise ConfigError("inference.processing_seconds", inf.processing_seconds,
                              f"at most {max_s} s for {kind}; {_ALTERNATIVE[kind]}", reason=f"over the {kind} time limit")


RULES: tuple[Callable[[Workload, Catalog], None], ...] = (
    region_is_known,
    zone_is_in_region,
    second_zone_is_another_zone_of_the_region,
    training_type_is_known,
    classic_ml_trains_on_cpu,
    training_type_can_train,
    cluster_networking_needs_efa,
    capacity_reservation_is_complete,
    capacity_reservation_in_cluster_az,
    orchestrator_supports_type,
    training_plan_needs_hyperpod,
    training_plan_in_the_region,
    notebook_type_is_known,
    scikit_learn_is_single_node,
    inference_types_are_known,
    serverless_holds_the_model,
    inference_limits,
    artifact_format_fits_framework,
    artifact_keys_fit_the_format,
    llm_is_not_serverless,
    architecture_fits_the_model,
    decoder_shape_is_consistent,
)


ADVICE: tuple[Callable[[Workload, Catalog], list[Finding]], ...] = (
    burstable_types_do_not_train_well,
    listed_kinds_are_not_served,
    ignored_fields,
)


def advice(w: Workload, cat: Catalog | None = None) -> list[Finding]:
    """Every WARNING and INFO finding about a config that passed `check`."""
    cat = cat or load_catalog()
    return [f for rule in ADVICE for f in rule(w, cat)]


def check(w: Workload, cat: Catalog | None = None) -> None:
    """Run every rule and report every broken one at once."""
    cat = cat or load_catalog()
    errors = []
    for rule in RULES:
        try:
            rule(w, cat)
        except ConfigError as exc:
            if exc.field not in {e.field for e in errors}:  # one finding per field: the first rule's says it
                errors.append(exc)
    raise_all(errors)
