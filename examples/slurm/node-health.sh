#!/bin/bash
# One node's health, so a failing node takes no jobs. Run by the node's user data before slurmd starts (--full) and
# as the cluster's Slurm Prolog before each job (quick: Slurm passes no arguments). Exit 0: healthy; exit 1: the last
# line says why.
#   GPU:      nvidia-smi sees every GPU; full: DCGM's diagnostic `dcgmi diag -r 2` (the DLAMI ships DCGM)
#   Trainium: neuron-ls sees every device; full: nccom-test's single-node all-reduce, Neuron's quick environment check
# As the Prolog it drains its node with the reason (Slurm also drains a node whose Prolog fails, and requeues the job).
# The expected devices come from the plan: /opt/ml-estate/node-health.conf (KIND, DEVICES), written at boot.
set -uo pipefail
R="${ML_ESTATE_ROOT:-}"  # the file system root; empty on a node
MODE=quick
[ "${1:-}" = "--full" ] && MODE=full
CONF="$R/opt/ml-estate/node-health.conf"
[ -f "$CONF" ] || exit 0  # not an accelerated compute node (login): nothing to check
# shellcheck disable=SC1090
source "$CONF"

fail() {
  local reason="ml-estate health: $*"
  if [ -n "${SLURM_JOB_ID:-}" ] && [ -n "${SLURMD_NODENAME:-}" ]; then  # as the Prolog: drain this node, say why
    scontrol update NodeName="$SLURMD_NODENAME" State=DRAIN Reason="$reason" || true
  fi
  echo "$reason"
  exit 1
}

case "$KIND" in
  nvidia-gpu)
    seen=$(nvidia-smi -L 2>&1) || fail "nvidia-smi failed: $(echo "$seen" | tail -n 1)"
    count=$(grep -c '^GPU ' <<<"$seen")
    [ "$count" -eq "$DEVICES" ] || fail "nvidia-smi sees $count of $DEVICES GPUs"
    if [ "$MODE" = full ]; then
      diag=$(dcgmi diag -r 2 2>&1); rc=$?
      if [ $rc -ne 0 ] || grep -qi '| *fail' <<<"$diag"; then
        fail "dcgmi diag -r 2 failed: $(grep -i 'fail' <<<"$diag" | head -n 1 | tr -s ' |' ' ')"
      fi
    fi ;;
  trainium)
    seen=$(neuron-ls --json-output 2>&1) || fail "neuron-ls failed: $(echo "$seen" | tail -n 1)"
    count=$(python3 -c 'import json, sys; print(len(json.load(sys.stdin)))' <<<"$seen" 2>/dev/null) \
      || fail "neuron-ls printed no device list"
    [ "$count" -eq "$DEVICES" ] || fail "neuron-ls sees $count of $DEVICES Neuron devices"
    if [ "$MODE" = full ]; then
      check=$(nccom-test -r 2 allr 2>&1) || fail "nccom-test -r 2 allr failed: $(echo "$check" | tail -n 1)"
      grep -q 'Avg bus bandwidth' <<<"$check" || fail "nccom-test -r 2 allr: $(echo "$check" | tail -n 1)"
    fi ;;
  *) fail "unknown KIND=$KIND in $CONF" ;;
esac
echo "ml-estate health: ok ($KIND, $count devices, $MODE check)"
