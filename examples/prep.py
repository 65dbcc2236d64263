"""An example processing script for `python -m workloads process`: SageMaker Processing gives each instance its
shard of the input under /opt/ml/processing/input (ShardedByS3Key) and uploads /opt/ml/processing/output when the
script ends. This one keeps each CSV file's first header line and drops blank lines and repeated headers (shards
of a split file each start with one), so the output is clean training input."""

from __future__ import annotations

import os
from pathlib import Path

INPUT = Path(os.environ.get("PROCESSING_INPUT", "/opt/ml/processing/input"))
OUTPUT = Path(os.environ.get("PROCESSING_OUTPUT", "/opt/ml/processing/output"))


def clean(lines: list[str]) -> list[str]:
    header = lines[0] if lines else ""
    return [header] + [line for line in lines[1:] if line.strip() and line != header] if header else []


def main() -> None:
    files = sorted(p for p in INPUT.rglob("*") if p.is_file())
    for path in files:
        target = OUTPUT / path.relative_to(INPUT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(clean(path.read_text().splitlines(keepends=True))))
    print(f"cleaned {len(files)} file(s) from {INPUT} into {OUTPUT}")


if __name__ == "__main__":
    main()
