"""Ctrl-C ends a command the Unix way: no traceback, and the process dies of SIGINT, so its caller (a shell,
make, the CDK CLI) sees an interrupt (status 130 in a shell) rather than an error of its own."""

from __future__ import annotations

import os
import signal
import sys
from typing import NoReturn


def die_of_sigint() -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    raise SystemExit(130)  # where SIGINT cannot kill (it was ignored when we started): the shell's number for it


def quiet_interrupts() -> None:
    """From here on, Ctrl-C stops the process at once, at any point (an import included), without a traceback.
    For commands with nothing to clean up; one that must stop something first catches KeyboardInterrupt instead."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # started with SIGINT ignored (a background job): keep it so
        signal.signal(signal.SIGINT, lambda *_: die_of_sigint())
    # app.sh starts Python with SIGINT blocked, so that a Ctrl-C during the interpreter's own start (its site imports,
    # before any line of ours runs) waits here instead of printing a KeyboardInterrupt traceback: taken now, it
    # ends the process as above.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
