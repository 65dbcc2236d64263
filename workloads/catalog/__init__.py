"""Instance facts and prices, each with its source and as-of date (instances.yaml, regions.yaml).

Loaded once, lazily; pure Python so the planner stays fast and CDK-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import date
from functools import cache
from pathlib import Path

from ..packaged import read_packaged_yaml

_HERE = Path(__file__).parent
ML_PREFIX = "ml."
# Prices are recorded for these regions; elsewhere the plan uses us-east-1 and says so.
PRICED_REGIONS = ("us-east-1", "us-west-2")


@dataclass(frozen=True)
class Accelerator:
    """An instance type's accelerators: what kind, which model, how many, and each one's memory."""
    kind: str  # nvidia-gpu | trainium | inferentia
    model: str
    count: int
    memory_gib: float


@dataclass(frozen=True)
class Price:
    """One hourly price of an instance type, for the region it was read in, with its kind."""
    usd_per_hour: float
    region: str  # the region the figure is for (may differ from the one asked)
    note: str = ""
    kind: str = "EC2 on-demand"  # EC2 on-demand | SageMaker on-demand | EC2 Capacity Block

    @property
    def label(self) -> str:
        """The kind and the region the figure is for, with the fallback note when that is not the plan's region."""
        return f"{self.kind}, {self.region}" + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class InstanceType:
    """One catalog entry (catalog/instances.yaml): an instance type's size, accelerators, network and prices."""
    name: str
    family: str
    vcpus: int
    memory_gib: float
    accelerator: Accelerator | None
    peak_tflops: float | None
    peak_tflops_dtype: str | None
    efa_max_interfaces: int
    network_cards: int
    efa_on_card0: bool  # P6-B300's card 0 is ENA-only: its EFA devices sit on cards 1-16
    network_gbps: float
    local_nvme: bool
    regions: tuple[str, ...]
    ec2_prices: dict[str, float | None]
    sagemaker_prices: dict[str, float | None]
    capacity_block_prices: dict[str, float | None]
    sources: tuple[str, ...]
    as_of: str
    note: str = ""
    # How EC2 sells it (instances.yaml `sold`): the regions with an on-demand offering (None: every region of
    # `regions`) and those with Capacity Blocks for ML (None: not recorded).
    on_demand_regions: tuple[str, ...] | None = None
    capacity_block_regions: tuple[str, ...] | None = None
    sold_sources: tuple[str, ...] = ()
    # Price kinds whose recorded figure is not confirmed at AWS (instances.yaml `price_unconfirmed`: kind -> why):
    # the plan's price line says so, with the figure's date.
    price_unconfirmed: dict[str, str] = field(default_factory=dict)

    @property
    def accelerated(self) -> bool:
        return self.accelerator is not None

    def sold_on_demand(self, region: str) -> bool:
        """Whether EC2 sells it on-demand in `region` (a node group that launches on-demand can start it there)."""
        return region in (self.regions if self.on_demand_regions is None else self.on_demand_regions)

    @property
    def on_sagemaker(self) -> bool:
        return any(v is not None for v in self.sagemaker_prices.values())

    def price(self, region: str, *, sagemaker: bool, capacity_block: bool = False) -> Price | None:
        """$/h of one kind (SageMaker on-demand, EC2 on-demand or EC2 Capacity Block) in `region`, or a priced
        region's figure with a note when not recorded. Never another kind: kinds are compared like for like."""
        kind = "EC2 Capacity Block" if capacity_block else "SageMaker on-demand" if sagemaker else "EC2 on-demand"
        prices = self.capacity_block_prices if capacity_block else self.sagemaker_prices if sagemaker \
            else self.ec2_prices
        key = "capacity_block" if capacity_block else "sagemaker" if sagemaker else "ec2"
        doubt = f"UNCONFIRMED: {self.price_unconfirmed[key]} (as of {self.as_of})" \
            if key in self.price_unconfirmed else ""
        if prices.get(region) is not None:
            return Price(float(prices[region]), region, doubt, kind=kind)
        for fallback in (*PRICED_REGIONS, *prices):
            if prices.get(fallback) is not None:
                note = "; ".join(n for n in (f"no {region} price recorded; {fallback} price shown", doubt) if n)
                return Price(float(prices[fallback]), fallback, note, kind=kind)
        return None


# Devices per accelerator chip: one process (a tensor-parallel shard, a training rank) runs on each. NeuronCores
# per chip (Neuron docs): Inferentia2 and Trainium 2 NeuronCore-v2; Trainium2 8 NeuronCore-v3 in pairs by default
# (logical NeuronCore config 2), so 4 logical cores. GPUs: one device each.
NEURON_CORES_PER_CHIP = {"Inferentia2": 2, "Trainium": 2, "Trainium2": 4}


def devices(itype: InstanceType) -> tuple[int, float]:
    """(devices, GiB each) of an accelerated type: its GPUs, or its (logical) NeuronCores."""
    acc = itype.accelerator
    assert acc is not None
    count = acc.count * NEURON_CORES_PER_CHIP.get(acc.model, 1)
    return count, acc.memory_gib / count


@dataclass(frozen=True)
class NetworkInterface:
    """One network interface of a launch template: its network card, device index and kind."""
    card: int
    device: int
    kind: str  # "interface" (ENA), "efa" (EFA with ENA) or "efa-only"


PRIMARY = (NetworkInterface(0, 0, "interface"),)  # one ordinary interface: login nodes, nodes without EFA


def network_interfaces(itype: InstanceType, *, efa: bool) -> tuple[NetworkInterface, ...]:
    """A node's interfaces from its network-card facts (EC2 guide, "Maximize network bandwidth on Amazon EC2
    instances with multiple network cards"): the primary (card 0, device 0) is ENA and never EFA-only; where card 0
    carries EFA, an EFA-only interface at card 0 device 1; then one EFA-only interface at device 0 on each further
    card, up to the type's EFA maximum. One IP address per node: EFA-only interfaces take none. A single-card type
    has one EFA with ENA as its primary (an EFA-only interface cannot be primary, and there is no other card)."""
    if not efa or itype.efa_max_interfaces == 0:
        return PRIMARY
    if itype.network_cards == 1:
        return (NetworkInterface(0, 0, "efa"),)
    cards = range(0 if itype.efa_on_card0 else 1, itype.network_cards)
    efa_only = [NetworkInterface(card, 1 if card == 0 else 0, "efa-only") for card in cards]
    return (*PRIMARY, *efa_only[:itype.efa_max_interfaces])


@dataclass(frozen=True)
class Source:
    """A document the catalog's facts cite, with the date it was checked."""
    key: str
    title: str
    url: str
    checked: str
    note: str = ""


@dataclass(frozen=True)
class Catalog:
    """The instance catalog: every type, the sources they cite, and the regions and zones the planner knows."""
    types: dict[str, InstanceType]
    sources: dict[str, Source]
    regions: dict[str, tuple[str, ...]]  # region -> availability zone letters
    as_of: str
    zone_id_prefixes: dict[str, str] = field(default_factory=dict)  # region -> its AZ IDs' prefix (use1)
    # The families AWS PCS runs in an EC2 Capacity Block, and the source that says so.
    pcs_capacity_block_families: frozenset[str] = frozenset()
    pcs_capacity_block_source: str = ""
    # EC2 Capacity Blocks for ML: what one account can hold (instances_per_block, instances_per_account, max_days,
    # source).
    capacity_block_limits: dict = field(default_factory=dict)
    # SageMaker training plans: instance_counts (the quantities a plan reserves), max_days, source.
    training_plan_limits: dict = field(default_factory=dict)
    # A team's allowed instance families (None: all): the planner compares and chooses only these.
    allowed_families: frozenset[str] | None = None

    def allows(self, name: str) -> bool:
        return self.allowed_families is None or strip_ml(name).split(".")[0] in self.allowed_families

    def for_families(self, families: list[str] | None) -> "Catalog":
        """This catalog, with the planner's choices limited to `families` (its facts stay complete)."""
        return replace(self, allowed_families=frozenset(families) if families else None)

    def zone_id_pattern(self, region: str) -> str:
        """How the region's AZ IDs are written (use2-az<N>), for messages."""
        return f"{self.zone_id_prefixes.get(region, '<prefix>')}-az<N>"

    def is_zone_id_of(self, zone: str, region: str) -> bool:
        """`zone` is written as an AZ ID of `region` (whether the account has that number, only it can say)."""
        prefix = self.zone_id_prefixes.get(region)
        return prefix is not None and re.fullmatch(rf"{re.escape(prefix)}-az[1-9][0-9]*", zone) is not None

    def get(self, name: str) -> InstanceType | None:
        """Look a type up by its EC2 name or its SageMaker `ml.` name."""
        return self.types.get(strip_ml(name))

    def names(self, *, sagemaker: bool = False) -> list[str]:
        if sagemaker:
            return [ML_PREFIX + t.name for t in self.types.values() if t.on_sagemaker]
        return list(self.types)


ZONE_ID = re.compile(r"[a-z]+[0-9]+-az[0-9]+")  # an AZ ID (use2-az2), never a zone name (us-east-2b)


def is_zone_id(zone: str) -> bool:
    return ZONE_ID.fullmatch(zone) is not None


def strip_ml(name: str) -> str:
    return name[len(ML_PREFIX):] if name.startswith(ML_PREFIX) else name


def _cited(what: str, cited: list[str], known: dict[str, Source]) -> None:
    """Every fact names sources the catalog records: an unknown key is a typo or a missing source."""
    missing = [key for key in cited if key not in known]
    if missing:
        raise ValueError(f"{what} cites unknown sources {missing}")


def _load_yaml(name: str) -> dict:
    return read_packaged_yaml(_HERE / name)


def _instance(raw: dict, known_sources: dict[str, Source]) -> InstanceType:
    _cited(f"catalog entry {raw['type']}", raw["sources"], known_sources)
    acc = raw.get("accelerator")
    prices = raw["price_usd_per_hour"]
    efa_cards = int(raw.get("network_cards") or 1) - (0 if raw.get("efa_on_card0", True) else 1)
    if int(raw["efa_max_interfaces"]) > efa_cards:
        raise ValueError(f"catalog entry {raw['type']}: {raw['efa_max_interfaces']} EFA devices on {efa_cards} cards")
    sold = raw.get("sold")
    if sold is not None:
        _cited(f"catalog entry {raw['type']} sold", sold["sources"], known_sources)
    return InstanceType(
        name=raw["type"],
        family=raw["family"],
        vcpus=int(raw["vcpus"]),
        memory_gib=float(raw["memory_gib"]),
        accelerator=Accelerator(acc["kind"], acc["model"], int(acc["count"]), float(acc["memory_gib"])) if acc else None,
        peak_tflops=float(raw["peak_tflops"]) if raw.get("peak_tflops") is not None else None,
        peak_tflops_dtype=raw.get("peak_tflops_dtype"),
        efa_max_interfaces=int(raw["efa_max_interfaces"]),
        network_cards=int(raw.get("network_cards") or 1),
        efa_on_card0=bool(raw.get("efa_on_card0", True)),
        network_gbps=float(raw["network_gbps"]),
        local_nvme=bool(raw["local_nvme"]),
        regions=tuple(raw["regions"]),
        ec2_prices=dict(prices.get("ec2") or {}),
        sagemaker_prices=dict(prices.get("sagemaker") or {}),
        capacity_block_prices=dict(prices.get("capacity_block") or {}),
        sources=tuple(raw["sources"]),
        as_of=str(raw["as_of"]),
        note=raw.get("note") or "",
        on_demand_regions=tuple(sold["on_demand"]) if sold else None,
        capacity_block_regions=tuple(sold["capacity_block"]) if sold and sold["capacity_block"] is not None else None,
        sold_sources=tuple(sold["sources"]) if sold else (),
        price_unconfirmed=dict(raw.get("price_unconfirmed") or {}),
    )


@cache
def load_catalog() -> Catalog:
    data = _load_yaml("instances.yaml")
    sources = {
        key: Source(key, s["title"], s["url"], str(s["checked"]), s.get("note") or "")
        for key, s in data["sources"].items()
    }
    types = {raw["type"]: _instance(raw, sources) for raw in data["instances"]}
    from .refreshed import apply  # a user's `prices refresh`, over the shipped figures
    types, sources = apply(types, sources, Source)
    regions_data = _load_yaml("regions.yaml")
    regions = {region: tuple(letters) for region, letters in regions_data["regions"].items()}
    pcs = data["pcs_capacity_block_families"]
    _cited("pcs_capacity_block_families", [pcs["source"]], sources)
    limits = dict(data["capacity_block_limits"])
    _cited("capacity_block_limits", [limits["source"]], sources)
    plans = dict(data["training_plan_limits"])
    _cited("training_plan_limits", [plans["source"]], sources)
    return Catalog(types=types, sources=sources, regions=regions, as_of=str(data["as_of"]), capacity_block_limits=limits,
                   training_plan_limits=plans,
                   zone_id_prefixes=dict(regions_data["zone_id_prefixes"]),
                   pcs_capacity_block_families=frozenset(pcs["families"]), pcs_capacity_block_source=pcs["source"])


@dataclass(frozen=True)
class Measurement:
    """A figure read from a source: its value, the source's key and what was measured."""
    value: float
    source: str  # a key of the catalog's sources
    what: str


PRECISIONS = ("bf16", "fp8", "fp16")


@dataclass(frozen=True)
class MfuFigure(Measurement):
    """One published training run's MFU, with what its source states about the run."""

    precision: str = "bf16"
    recompute: bool | None = None  # activation checkpointing in the measured run (None: the source does not say)
    global_batch_tokens: int | None = None
    # What the source's MFU counts beside 6 x parameters per token: "full" attention (12 x layers x hidden x sequence
    # FLOPs per token, llm-foundry's), "causal" (half that, Megatron-Bridge's), or None: the source does not say
    # (taken as 6N already). With the measured model's shape and the row's sequence, the figure on the plan's 6N basis.
    attention: str | None = None
    sequence: int | None = None
    layers: int | None = None
    hidden: int | None = None
    parameters_billion: float | None = None
    # The software that ran it (torchtitan, Megatron-Bridge, llm-foundry, Neuron ...): the planner takes a band's
    # likely figure from its fastest stack (estimates.utilisation_range). Absent in the data: the source's own.
    stack: str = ""

    @property
    def on_6n(self) -> float:
        """The MFU counting 6 x parameters per token only, the plan's basis: MFU x 6N / (6N + k x L x h x s), k = 12
        for full attention, 6 for causal."""
        if self.attention is None or not (self.sequence and self.layers and self.hidden and self.parameters_billion):
            return self.value
        six_n = 6 * self.parameters_billion * 1e9
        k = {"full": 12, "causal": 6}[self.attention]
        return self.value * six_n / (six_n + k * self.layers * self.hidden * self.sequence)


@dataclass(frozen=True)
class Interconnect:
    """One device's link to the others in its node (NVLink, NeuronLink or PCIe), GB/s in each direction."""

    gb_s: float
    source: str
    what: str
    stand_in: str | None = None  # the device whose figure this is, where the model has none of its own
    unconfirmed: bool = False


TRAINER_STACK = "ml-estate-trainer"  # utilisation.yaml rows measured on this toolkit's own trainer


@dataclass(frozen=True)
class Utilisation:
    """Published MFU figures by accelerator model and size band, and classic-ML CPU throughput."""

    mfu: dict[tuple[str, str], tuple[MfuFigure, ...]]  # (accelerator model, band) -> bf16 figures
    stand_in: dict[str, str]
    spread_from: str
    large_band_billion: float
    classic_rates: tuple[Measurement, ...]  # cell-rounds per vCPU-second
    classic_rounds: int
    # (accelerator model, band, precision) -> figures, every precision
    by_precision: dict[tuple[str, str, str], tuple[MfuFigure, ...]] = field(default_factory=dict)
    # precision -> accelerator model -> (dense TFLOPS per device, source) beside the catalog's own dtype
    peaks: dict[str, dict[str, tuple[float, str]]] = field(default_factory=dict)
    stand_in_by_precision: dict[str, dict[str, str]] = field(default_factory=dict)
    # accelerator model -> its link to the other devices of its node: GB/s a direction, and what the figure is
    intra_node: dict[str, Interconnect] = field(default_factory=dict)
    # accelerator model -> (precision, source, why) where its stand-in was kept after its own rows were searched for
    borrowed: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    # This toolkit's own trainer, measured (stack TRAINER_STACK): (accelerator model, precision) -> figures, kept apart
    # from the published rows; and the accelerators that take another's measurement until they have one
    trainer: dict[tuple[str, str], tuple[MfuFigure, ...]] = field(default_factory=dict)
    trainer_stand_in: dict[str, str] = field(default_factory=dict)

    def figures(self, model: str, band: str, precision: str) -> tuple[MfuFigure, ...]:
        return self.by_precision.get((model, band, precision), ())

    def trainer_figures(self, model: str, precision: str) -> tuple[tuple[MfuFigure, ...], str | None]:
        """The shipped trainer's measured rows on `model` in `precision`, or its stand-in's (named), else ()."""
        for who in (model, self.trainer_stand_in.get(model)):
            if who and (rows := self.trainer.get((who, precision))):
                return rows, None if who == model else who
        return (), None


@cache
def load_utilisation() -> Utilisation:
    data = _load_yaml("utilisation.yaml")
    known = load_catalog().sources
    rows: dict[tuple[str, str, str], list[MfuFigure]] = {}
    trainer: dict[tuple[str, str], list[MfuFigure]] = {}
    for m in data["mfu"]:
        _cited("utilisation.yaml", [m["source"]], known)
        precision = m.get("precision", "bf16")
        if precision not in PRECISIONS:
            raise ValueError(f"utilisation.yaml: {m['what']}: precision {precision!r}, not one of {PRECISIONS}")
        shape = data["measured_models"][m["model"]] if m.get("model") else {}
        if m.get("attention") not in (None, "full", "causal"):
            raise ValueError(f"utilisation.yaml: {m['what']}: attention {m['attention']!r}, not full, causal or null")
        into = trainer.setdefault((m["accelerator"], precision), []) if m.get("stack") == TRAINER_STACK else \
            rows.setdefault((m["accelerator"], m["band"], precision), [])
        into.append(MfuFigure(
            float(m["mfu"]), m["source"], m["what"], precision=precision, recompute=m["recompute"],
            global_batch_tokens=m["global_batch_tokens"], attention=m.get("attention"), sequence=m.get("seq"),
            layers=shape.get("layers"), hidden=shape.get("hidden"), parameters_billion=shape.get("parameters_billion"),
            stack=m.get("stack", m["source"])))
    peaks: dict[str, dict[str, tuple[float, str]]] = {}
    for precision, by_model in data["peak_tflops_per_device"].items():
        for model, peak in by_model.items():
            _cited("utilisation.yaml peak_tflops_per_device", [peak["source"]], known)
            peaks.setdefault(precision, {})[model] = (float(peak["tflops"]), peak["source"])
    rates = tuple(Measurement(float(r["rate"]), r["source"], r["what"]) for r in data["classic_cells_per_vcpu_second"])
    return Utilisation(mfu={(a, b): tuple(v) for (a, b, p), v in rows.items() if p == "bf16"},
                       stand_in=dict(data["stand_in"]), spread_from=data["spread_from"],
                       large_band_billion=float(data["large_band_billion"]), classic_rates=rates,
                       classic_rounds=int(data["classic_rounds"]),
                       by_precision={k: tuple(v) for k, v in rows.items()}, peaks=peaks,
                       stand_in_by_precision={p: dict(v) for p, v in data["stand_in_by_precision"].items()},
                       intra_node=_intra_node(data.get("intra_node_gb_s_per_device", {}), known),
                       borrowed={m: (b["precision"], b["source"], f"{b['why']} (searched {b['searched']})")
                                 for m, b in data.get("borrowed", {}).items()},
                       trainer={k: tuple(v) for k, v in trainer.items()},
                       trainer_stand_in=dict(data.get("trainer_stand_in", {})))


def _intra_node(rows: dict, known: dict[str, Source]) -> dict[str, Interconnect]:
    out = {}
    for model, row in rows.items():
        _cited("utilisation.yaml intra_node_gb_s_per_device", [row["source"]], known)
        out[model] = Interconnect(float(row["gb_s"]), row["source"], row["what"], row.get("stand_in"),
                                  bool(row.get("unconfirmed", False)))
    return out


@dataclass(frozen=True)
class SoftwareStack:
    """The pinned training software of an accelerator family: the node image's parent and what it installs."""

    name: str
    accelerators: tuple[str, ...]
    pip: tuple[str, ...]
    index_urls: tuple[str, ...]
    torch: str  # the torch version the bake checks for
    device: str  # train.py --device
    sources: tuple[str, ...]
    note: str = ""
    neuron_release: str | None = None  # Neuron: the SDK release the pins and the parent DLAMI belong to
    cuda: str | None = None  # CUDA: the CUDA version of the wheel
    # A family's last supported release, kept after its vendor moved on: what that means (the plan's WARNING) and
    # the documents that say so. Empty for current stacks.
    legacy: str = ""
    legacy_sources: tuple[str, ...] = ()
    # A stack its vendor calls beta (TorchNeuron in Neuron 2.33): what that means and where it is written.
    beta: str = ""
    beta_sources: tuple[str, ...] = ()
    # The parent DLAMI, for ec2:DescribeImages at deploy time (owner, name pattern); on Neuron its description names
    # the release (`release_marker`).
    parent_dlami_owner: str = "amazon"
    parent_dlami_name: str = ""
    # The parent's Python and glibc, which pick the wheels its hash lock holds (catalog/node_locks.py)
    node_python: str = ""
    node_glibc: str = ""

    @property
    def release_marker(self) -> str | None:
        """What a DLAMI's description says of this Neuron release ("Neuron SDK 2.33.0"): a release line (2.28)
        takes any of its patch releases, and its dot keeps 2.28 from matching 2.280."""
        if not self.neuron_release:
            return None
        return f"Neuron SDK {self.neuron_release}" + ("." if self.neuron_release.count(".") == 1 else "")

    def parent_dlami_query(self) -> dict:
        """DescribeImages' arguments for the parent DLAMIs: owner and name. Every release's DLAMI of that name
        answers; the caller keeps those whose description names `release_marker` (workloads/commands/dlami.py), so a miss can
        say which releases the region has."""
        return {"Owners": [self.parent_dlami_owner], "Filters": [{"Name": "name", "Values": [self.parent_dlami_name]}]}


@dataclass(frozen=True)
class Software:
    """The software the node images install (catalog/software.yaml): stacks, drivers and disk sizes."""
    stacks: tuple[SoftwareStack, ...]
    unsupported: dict[str, str]  # accelerator model -> why no stack trains on it
    drivers: dict[str, str] = field(default_factory=dict)  # images we do not bake -> their NVIDIA driver
    cuda_majors_by_driver_branch: dict[int, int] = field(default_factory=dict)
    root_volume_default_gib: int = 0
    root_volume_minimum_gib: dict[str, int] = field(default_factory=dict)  # accelerator kind -> GiB
    sources: dict[str, Source] = field(default_factory=dict)
    example_pip: tuple[str, ...] = ()  # the example trainer's own packages, beside every stack's pins

    def root_volume_gib(self, itype: InstanceType | None) -> int:
        """A node's root volume: the default, or more where its accelerator's vendor asks for more."""
        kind = itype.accelerator.kind if itype is not None and itype.accelerator else ""
        return max(self.root_volume_default_gib, self.root_volume_minimum_gib.get(kind, 0))

    def cuda_runs_on(self, cuda: str, *, driver: str) -> bool:
        """Whether an NVIDIA driver runs a CUDA toolkit's binaries (minor version compatibility within a major)."""
        branch = int(driver.split(".")[0])
        return self.cuda_majors_by_driver_branch.get(branch) == int(cuda.split(".")[0])

    def for_type(self, itype: InstanceType) -> SoftwareStack | str:
        """The stack that trains on this type, or why none does."""
        model = itype.accelerator.model if itype.accelerator else None
        for stack in self.stacks:
            if model in stack.accelerators:
                return stack
        return self.unsupported.get(model or "", f"no training software stack recorded for {model}")


@cache
def load_software() -> Software:
    data = _load_yaml("software.yaml")
    own = {key: Source(key, s["title"], s["url"], str(s["checked"]), s.get("note") or "")
           for key, s in data.get("sources", {}).items()}
    known = {**load_catalog().sources, **own}
    stacks = []
    for raw in data["stacks"]:
        _cited(f"software.yaml stack {raw['name']}", raw["sources"], known)
        stacks.append(SoftwareStack(
            name=raw["name"], accelerators=tuple(raw["accelerators"]),
            pip=tuple(raw["pip"]), index_urls=tuple(raw["index_urls"]), torch=str(raw["torch"]),
            device=raw["device"], sources=tuple(raw["sources"]), note=raw.get("note") or "",
            neuron_release=str(raw["neuron_release"]) if raw.get("neuron_release") else None,
            cuda=str(raw["cuda"]) if raw.get("cuda") else None, legacy=raw.get("legacy") or "",
            legacy_sources=tuple(raw.get("legacy_sources") or ()), beta=raw.get("beta") or "",
            beta_sources=tuple(raw.get("beta_sources") or ()),
            parent_dlami_owner=raw["parent_dlami"]["owner"], parent_dlami_name=raw["parent_dlami"]["name"],
            node_python=str(raw["node_platform"]["python"]), node_glibc=str(raw["node_platform"]["glibc"])))
        _cited(f"software.yaml stack {raw['name']} node_platform", raw["node_platform"]["sources"], known)
        if raw.get("legacy"):
            _cited(f"software.yaml stack {raw['name']} legacy", raw["legacy_sources"], known)
        if raw.get("beta"):
            _cited(f"software.yaml stack {raw['name']} beta", raw["beta_sources"], known)
    for name, driver in data["drivers"].items():
        _cited(f"software.yaml driver {name}", driver["sources"], known)
    _cited("software.yaml cuda_majors_by_driver_branch", data["cuda_sources"], known)
    volume = data["root_volume"]
    _cited("software.yaml root_volume", volume["sources"], known)
    return Software(stacks=tuple(stacks), unsupported=dict(data["unsupported"]),
                    drivers={name: str(d["nvidia"]) for name, d in data["drivers"].items()},
                    cuda_majors_by_driver_branch={int(k): int(v) for k, v in data["cuda_majors_by_driver_branch"].items()},
                    root_volume_default_gib=int(volume["default_gib"]),
                    root_volume_minimum_gib={k: int(v) for k, v in volume["minimum_gib"].items()}, sources=own,
                    example_pip=tuple(data["example_pip"]))


@dataclass(frozen=True)
class DecodeMeasurement:
    """A published decode speed: milliseconds a token for a model size on an accelerator."""
    accelerator: str
    tensor_parallel: int  # GPUs or NeuronCores
    parameters_billion: float
    ms_per_token: float
    source: str
    what: str

    @property
    def runtime(self) -> str:
        return runtime_of(self.accelerator)


def runtime_of(accelerator_model: str) -> str:
    """The serving runtime whose decode fit applies: TGI on NVIDIA GPUs, Neuron on Inferentia2."""
    return "nvidia-gpu" if accelerator_model.startswith("NVIDIA") else "inferentia"


@dataclass(frozen=True)
class DecodeFit:
    """One runtime's fitted decode constants (catalog/serving.yaml decode_fit)."""

    efficiency: float  # share of bandwidth decode reaches
    overhead_ms_one: float  # per generated token, model on one device
    overhead_ms_sharded: float  # per generated token, tensor-parallel model


@dataclass(frozen=True)
class CpuServing:
    """Requests per second one vCPU serves a boosted-tree model at, through SageMaker's XGBoost serving path."""

    name: str
    per_second_per_vcpu: float  # one worker per vCPU kept busy
    one_request_ms: float  # one request at a time, round trip from the client
    source: str
    what: str


@dataclass(frozen=True)
class ServingFacts:
    """Memory bandwidth per device and the serving measurements the planner is calibrated on."""

    bandwidth_gbs: dict[str, float]  # accelerator model -> GB/s per GPU or chip
    bandwidth_sources: dict[str, str]
    fits: dict[str, DecodeFit]  # runtime -> fitted decode constants
    decode: tuple[DecodeMeasurement, ...]
    prefill: dict[str, tuple[Measurement, ...]]  # accelerator model -> prompt MFU of each published TTFT
    max_batch: dict[str, tuple[int, str]]  # runtime -> (most requests decoded together, source)
    encoder: tuple[Measurement, ...]  # value: model-FLOPs utilisation of each published encoder figure
    scaling_safety_factor: float
    cpu_classic: tuple[CpuServing, ...]  # slowest (largest model) to fastest
    cpu_classic_likely: CpuServing
    cpu_encoder: tuple[Measurement, ...]  # value: GFLOPS one vCPU reaches on a 512-token encoder request
    cpu_threads_per_core: tuple[int, str]  # hardware threads (vCPUs) per physical core of the CPU types served, source
    driver_mib: dict[str, tuple[int, str]]  # GPU model -> (MiB the driver reports, source)
    vllm_reserve_gib: tuple[float, str]  # per GPU, inside gpu_memory_utilization, besides weights and KV cache; source

    def core_gbs(self, accelerator: str) -> float | None:
        """Bandwidth of one tensor-parallel device: a GPU, or a NeuronCore's share of its chip."""
        gbs = self.bandwidth_gbs.get(accelerator)
        return gbs / NEURON_CORES_PER_CHIP.get(accelerator, 1) if gbs else None

    def device_gbs(self, itype: InstanceType) -> float | None:
        return self.core_gbs(itype.accelerator.model) if itype.accelerator else None


@cache
def load_serving() -> ServingFacts:
    data = _load_yaml("serving.yaml")
    known = load_catalog().sources
    bw = data["bandwidth_gbs"]
    _cited("serving.yaml bandwidth", [b["source"] for b in bw.values()], known)
    _cited("serving.yaml decode", [m["source"] for m in data["decode"]], known)
    _cited("serving.yaml prefill", [r["source"] for rows in data["prefill"].values() for r in rows], known)
    _cited("serving.yaml max_batch", [b["source"] for b in data["max_batch"].values()], known)
    enc = data["encoder"]
    _cited("serving.yaml encoder", [f["source"] for f in enc["figures"]], known)
    peak = float(enc["peak_tflops_per_device"]) * 1e12
    fit = data["decode_fit"]
    classic = data["cpu_classic"]
    _cited("serving.yaml cpu_classic", [c["source"] for c in classic["figures"]], known)
    _cited("serving.yaml cpu_encoder", [c["source"] for c in data["cpu_encoder"]], known)
    _cited("serving.yaml cpu_threads_per_core", [data["cpu_threads_per_core"]["source"]], known)
    _cited("serving.yaml driver_memory_mib", [d["source"] for d in data["driver_memory_mib"].values()], known)
    _cited("serving.yaml vllm_runtime_reserve", [data["vllm_runtime_reserve"]["source"]], known)
    cpu = sorted((CpuServing(c["name"], float(c["per_second_per_vcpu"]), float(c["one_request_ms"]), c["source"],
                             c["what"]) for c in classic["figures"]), key=lambda c: c.per_second_per_vcpu)
    return ServingFacts(
        bandwidth_gbs={k: float(v["gbs"]) for k, v in bw.items()},
        bandwidth_sources={k: v["source"] for k, v in bw.items()},
        fits={k: DecodeFit(float(v["bandwidth_efficiency"]), float(v["overhead_ms_one_device"]),
                           float(v["overhead_ms_sharded"])) for k, v in fit.items()},
        prefill={model: tuple(Measurement(2 * r["parameters_billion"] * 1e9 * r["input_tokens"]
                                          / (r["ttft_ms"] / 1e3 * r["peak_tflops"] * 1e12), r["source"], r["what"])
                              for r in rows) for model, rows in data["prefill"].items()},
        max_batch={k: (int(v["size"]), v["source"]) for k, v in data["max_batch"].items()},
        decode=tuple(DecodeMeasurement(m["accelerator"], int(m["tensor_parallel"]), float(m["parameters_billion"]),
                                       float(m["ms_per_token"]), m["source"], m["what"]) for m in data["decode"]),
        encoder=tuple(Measurement(f["per_second"] * 2 * f["parameters_billion"] * 1e9 * f["tokens"] / peak,
                                  f["source"], f["what"]) for f in enc["figures"]),
        scaling_safety_factor=float(data["scaling_safety_factor"]),
        cpu_classic=tuple(cpu), cpu_classic_likely=next(c for c in cpu if c.name == classic["likely"]),
        cpu_encoder=tuple(Measurement(float(c["gflops_per_vcpu"]), c["source"], c["what"]) for c in data["cpu_encoder"]),
        cpu_threads_per_core=(int(data["cpu_threads_per_core"]["value"]), data["cpu_threads_per_core"]["source"]),
        driver_mib={k: (int(v["mib"]), v["source"]) for k, v in data["driver_memory_mib"].items()},
        vllm_reserve_gib=(float(data["vllm_runtime_reserve"]["gib_per_device"]), data["vllm_runtime_reserve"]["source"]),
    )


# AWS's Amazon Linux vLLM DLC shipped a release every two to four weeks in 2026 (docs/vllm/changelog: v2.0 06-05,
# v2.1 07-02, v2.2 08-03, v2.3 08-17, v2.4 08-25, v2.5 09-23): an image "supported while latest" not re-checked for
# 45 days is most likely no longer the latest.
LATEST_RECHECK_DAYS = 45


@dataclass(frozen=True)
class ImageSupport:
    """How long a serving container is supported (catalog/serving_images.yaml)."""

    container: str
    image: str
    ga: str | None
    eop: str | None  # end of patch, ISO date
    status: str  # dated | supported-while-latest | maintenance | unlisted | unknown
    note: str
    sources: tuple[str, ...]
    latest_checked: str | None = None  # supported-while-latest: the day it was last found to be the latest release

    def problem(self, today: str) -> str:
        """'' while supported on `today` (ISO date); else why not."""
        if self.status == "supported-while-latest":
            if not self.latest_checked:
                return f"{self.image} is supported only while it is the latest release, and no check date is recorded"
            stale = date.fromisoformat(today) - date.fromisoformat(self.latest_checked)
            if stale.days > LATEST_RECHECK_DAYS:
                return (f"{self.image} is supported only while it is the latest release, last checked "
                        f"{self.latest_checked} ({stale.days} days ago, more than {LATEST_RECHECK_DAYS}): check the "
                        "publisher's image data for a newer one")
        if self.status == "maintenance":
            return f"{self.image} is in maintenance: {self.note}"
        if self.status == "unlisted":  # the publisher's support policy lists other versions, not this one
            return f"{self.image} is not among the versions its publisher's support policy lists: {self.note}"
        if self.eop and self.eop < today:
            return f"{self.image} is past its end of patch {self.eop}: {self.note}"
        return ""


@cache
def load_image_support() -> dict[str, ImageSupport]:
    data = _load_yaml("serving_images.yaml")
    known = {key: Source(key, s["title"], s["url"], str(s["checked"]), s.get("note") or "")
             for key, s in data["sources"].items()}
    out = {}
    for key, raw in data["containers"].items():
        _cited(f"serving_images.yaml {key}", raw["sources"], known)
        out[key] = ImageSupport(key, raw["image"], raw["ga"], raw["eop"], raw["status"], raw["note"],
                                tuple(raw["sources"]), raw.get("latest_checked"))
    return out
