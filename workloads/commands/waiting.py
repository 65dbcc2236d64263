"""`submit --wait`: follow a training job until it ends, a line each time its status changes, with the seconds since
the wait began, as the AWS CLI's waiters and SageMaker's own logs do (issue 43: long commands were silent)."""

from __future__ import annotations

import time
from collections.abc import Callable

ENDED = ("Completed", "Failed", "Stopped")


def wait_for_job(client, name: str, *, poll_s: float = 30, say: Callable[[str], None] = print,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> str:
    """The job's final status (Completed, Failed or Stopped); one line per change of (status, secondary status)."""
    start, last = clock(), None
    while True:
        job = client.describe_training_job(TrainingJobName=name)
        status, secondary = job["TrainingJobStatus"], job.get("SecondaryStatus", "")
        if (status, secondary) != last:
            detail = next((t.get("StatusMessage", "") for t in reversed(job.get("SecondaryStatusTransitions", []))
                           if t.get("Status") == secondary), "")
            say(f"[{clock() - start:5.0f} s] {name}: {status}" + (f" / {secondary}" if secondary else "")
                + (f": {detail}" if detail else ""))
            last = (status, secondary)
        if status in ENDED:
            if status == "Failed" and job.get("FailureReason"):
                say(f"  failure reason: {job['FailureReason']}")
            return status
        sleep(poll_s)
