"""docs/configuration.md's field reference cannot drift from the schema (issue 34): every field the schema accepts is
in the table (a row of its own, or named in its section's row), and every row names fields the schema has."""

from __future__ import annotations

import re
import typing

from pydantic import BaseModel

from workloads.config.schema import Workload

from .conftest import ROOT

DOC = ROOT / "docs" / "configuration.md"
KINDS = ("realtime", "serverless", "async", "batch")


def _models(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def schema_fields(model: type[BaseModel] = Workload, prefix: str = "") -> list[str]:
    """Every dotted field path the schema accepts, sections and their fields."""
    out = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        path = prefix + key
        out.append(path)
        for sub in _models(field.annotation):
            out += schema_fields(sub, path + ".")
    return out


def doc_rows() -> dict[str, str]:
    """field -> meaning and default, for each row of the reference table (a row may name several fields)."""
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        for field in re.findall(r"`([^`]+)`", cells[0]):
            rows[field] = " | ".join(cells[1:])
    return rows


def documented(path: str, rows: dict[str, str]) -> bool:
    generic = re.sub(rf"^inference\.({'|'.join(KINDS)})\.", "inference.<kind>.", path)
    if path in rows or generic in rows:
        return True
    if any(row.startswith(path + ".") for row in rows):  # a section whose fields have rows of their own
        return True
    parent, _, name = path.rpartition(".")
    return any(re.search(rf"\b{re.escape(name)}\b", rows[p]) for p in (parent,) if p in rows)


def test_every_field_the_schema_accepts_is_in_the_reference():
    rows = doc_rows()
    missing = [p for p in schema_fields() if not documented(p, rows)]
    assert missing == [], f"docs/configuration.md lacks {missing}"


def test_every_field_the_reference_names_is_one_the_schema_accepts():
    accepted = set(schema_fields())
    generic = {re.sub(rf"^inference\.({'|'.join(KINDS)})\.", "inference.<kind>.", p) for p in accepted}
    unknown = [f for f in doc_rows() if f not in accepted | generic]
    assert unknown == [], f"docs/configuration.md names fields the schema refuses: {unknown}"
