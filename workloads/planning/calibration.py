"""`python -m workloads plan W --calibrate RESULT.json`: the calibration job's measured speed beside the plan's, and
the run's time and cost recomputed from it. RESULT.json is what examples/slurm/train.py --calibrate-output writes
(on a cluster the Calibrate output's job, exported by the FSx link to checkpoints/calibration/ in the bucket).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..catalog import load_catalog, load_utilisation
from ..errors import ConfigError
from . import estimates as est
from .training import TrainingPlan

FIELD = "--calibrate"
REQUIRED = ("tokens_per_s", "ranks", "nodes", "parameters")


@dataclass(frozen=True)
class Calibrated:
    measured_tokens_s: float  # as measured, on the result's nodes
    tokens_s: float  # on the plan's cluster: per rank times its ranks, or at the measured MFU (calibrate())
    mfu: float | None  # on the plan's hardware: 6N FLOPs per token over the cluster's dense peak
    planned_mfu: float | None
    planned_range: tuple[float, float] | None
    hours: float | None  # the run's time at the measured rate
    usd_total: float | None
    planned_hours_range: tuple[float, float] | None
    verdict: str
    warnings: tuple[str, ...]

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def read_result(path: str) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(FIELD, path, "a JSON file written by train.py --calibrate-output (the Calibrate output's "
                          "job)", reason=f"cannot be read ({exc.__class__.__name__})") from None
    missing = [k for k in REQUIRED if not isinstance(data, dict) or not isinstance(data.get(k), (int, float))]
    if missing or data["tokens_per_s"] <= 0 or data["nodes"] < 1:
        raise ConfigError(FIELD, path, f"a calibration result with numbers {', '.join(REQUIRED)} (tokens_per_s > 0)",
                          reason="not a calibration result" + (f" (missing {', '.join(missing)})" if missing else ""))
    return data


def _refuse_impossible(result: dict, mfu: float | None, t: TrainingPlan) -> None:
    """A result no hardware can produce is refused, not compared: above 100% MFU on the plan's hardware, or an `mfu`
    that its own tokens_per_s, parameters, ranks and peak_tflops_per_rank do not give."""
    if mfu is not None and mfu > 1:
        most = result["tokens_per_s"] / mfu
        raise ConfigError(f"{FIELD} tokens_per_s", result["tokens_per_s"], f"at most {most:,.0f} tokens/s on "
                          f"{result['nodes']} node(s) of {t.instance_type} (100% MFU); check ranks, nodes and "
                          "parameters, and train.py's --peak-tflops",
                          reason=f"{mfu:.1%} MFU on the plan's hardware is impossible")
    peak, own = result.get("peak_tflops_per_rank"), result.get("mfu")
    if isinstance(peak, (int, float)) and peak > 0 and isinstance(own, (int, float)):
        expected = 6 * result["parameters"] * result["tokens_per_s"] / (peak * 1e12 * result["ranks"])
        if abs(own - expected) > 0.05 * expected:
            raise ConfigError(f"{FIELD} mfu", own, f"{expected:.4g} (6 x parameters x tokens_per_s / "
                              "(peak_tflops_per_rank x 1e12 x ranks))",
                              reason="the result's mfu disagrees with its own figures")
        if own > 1:
            raise ConfigError(f"{FIELD} mfu", own, "at most 1 (100%); check train.py's --peak-tflops",
                              reason="an MFU above 100% is impossible")


def calibrate(t: TrainingPlan, result: dict) -> Calibrated:
    """The measured speed on the plan's cluster. Tokens/s carry over per rank only for the plan's own model on the
    plan's own device (times the plan's ranks: linear scaling, said in a warning when the ranks differ). A smaller
    model or another device carries over as MFU (6N FLOPs per token over the dense peak of the plan's precision), the
    basis of the planned range, and the run is recomputed at that MFU: an assumption, also said."""
    e, lay = t.estimate, t.parallelism
    warnings = []
    itype = load_catalog().get(t.instance_type)
    per_node = itype.accelerator.count if itype.accelerator else 1
    plan_ranks = lay.ranks if lay else t.instance_count * per_node
    per_rank = result["tokens_per_s"] / max(1, result["ranks"])
    if result["ranks"] != plan_ranks:
        warnings.append(f"measured on {result['ranks']} ranks ({result['nodes']} node(s)), the plan's layout has "
                        f"{plan_ranks} ({t.instance_count} nodes): scaling to them is assumed to cost nothing; run "
                        "the Calibrate output's job on the cluster for the plan's own figure")
    measured_in = result.get("precision")
    if t.precision and isinstance(measured_in, str) and measured_in != t.precision:
        warnings.append(f"measured in {measured_in}, the plan trains in {t.precision}: run the Calibrate output's job, "
                        f"which passes train.py {' '.join(t.speed_flags)}")
    if result.get("device") == "cpu":
        warnings.append("measured on CPU ranks: a test of the path, not the cluster's speed")
    device = result.get("device_name")
    plan_device = itype.accelerator.model if itype.accelerator else None
    other_device = isinstance(device, str) and result.get("device") != "cpu" and plan_device is not None \
        and plan_device.lower() not in device.lower()
    if other_device:
        warnings.append(f"measured on {device}, the plan runs {plan_device}: its MFU carries over, its tokens/s do "
                        "not")
    parameters = result["parameters"]
    planned_parameters = t.estimate.flops / 6 / (t.estimate.tokens_billion * 1e9) if t.estimate.flops else None
    other_model = bool(planned_parameters and abs(parameters / planned_parameters - 1) > 0.1)
    if other_model:
        warnings.append(f"measured a {parameters / 1e9:.3g}B-parameter model, the plan trains "
                        f"{planned_parameters / 1e9:.3g}B: the run below is at the measured MFU, which assumes MFU "
                        "carries over between model sizes")
    # over the dense peak of the plan's precision (fp8's where it trains in fp8), the basis of its planned range
    util = load_utilisation()
    peak = (est.peak_tflops(itype, t.precision, util) if t.precision else None) or itype.peak_tflops
    peak_rank = peak / per_node if peak else None
    own_peak = result.get("peak_tflops_per_rank")
    if other_device and isinstance(own_peak, (int, float)) and own_peak > 0 and peak_rank:
        # the measuring device's own peak (train.py's --peak-tflops, bf16), on the plan precision's basis
        bf16 = est.peak_tflops(itype, "bf16", util) or itype.peak_tflops
        peak_rank = own_peak * (peak / bf16 if bf16 else 1)
    mfu = 6 * parameters * per_rank / (peak_rank * 1e12) if peak_rank else None
    if not other_device:
        _refuse_impossible(result, mfu, t)
    if mfu is not None and isinstance(result.get("mfu"), (int, float)) and not own_peak \
            and abs(result["mfu"] / mfu - 1) > 0.1:
        warnings.append(f"the result's own mfu {result['mfu']:.1%} differs from {mfu:.1%} on the plan's hardware: "
                        "its --peak-tflops was not recorded; check the ranks and the peak it was given")
    if (other_model or other_device) and mfu and planned_parameters and peak:
        tokens_s = mfu * peak * 1e12 * t.instance_count / (6 * planned_parameters)
    else:
        tokens_s = per_rank * plan_ranks
    hours = usd = None
    if e.tokens_billion:
        hours = e.tokens_billion * 1e9 / tokens_s / 3600
        kind = "EC2 Capacity Block" if e.price_note.startswith("EC2 Capacity Block") else ""
        usd = est.billed_hours(hours, kind) * e.usd_per_hour if e.usd_total is not None else None
    verdict = "no planned range to compare"
    if mfu is not None and e.utilisation_range:
        low, high = e.utilisation_range
        verdict = ("within the planned range" if low <= mfu <= high else
                   f"below the planned range ({mfu / low:.0%} of its low end): check the acceptance job, the layout "
                   "and the input pipeline" if mfu < low else "above the planned range: the plan is pessimistic here")
    return Calibrated(measured_tokens_s=result["tokens_per_s"], tokens_s=tokens_s, mfu=mfu, planned_mfu=e.utilisation,
                      planned_range=e.utilisation_range, hours=hours, usd_total=usd,
                      planned_hours_range=e.hours_range, verdict=verdict, warnings=tuple(warnings))
