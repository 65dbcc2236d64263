#!/bin/sh
# The CDK CLI's app command (cdk.json). Ctrl-C reaches the whole foreground process group, the app included. One that
# lands while Python is still starting (its site imports, tens of milliseconds before app.py's first line) made the
# interpreter print a KeyboardInterrupt traceback. Started with SIGINT blocked, the interrupt waits until app.py's
# first line takes it (workloads/commands/interrupt.py), and the app dies of it quietly. GNU env blocks signals
# (coreutils 8.31+); where env cannot (BSD, macOS), the app starts as before.
if env --block-signal=INT true 2>/dev/null; then
  exec env --block-signal=INT python3 app.py "$@"
fi
exec python3 app.py "$@"
