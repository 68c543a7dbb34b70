#!/bin/bash
# fio and tilemark on one CPU with the kernel's unbound workqueues (where a loop device's
# worker runs): both tools in the same scheduler state, so the comparison is of the engines
# (bench/README.md, "One scheduler state for both tools"). Root; the mask is restored at exit.
#
#   bench/placement/pinned.sh /dev/loopN [QD] [BS] [RW] [REPS] [SECONDS]
set -euo pipefail
DEV=$1; QD=${2:-1}; BS=${3:-4k}; RW=${4:-randread}; N=${5:-3}; D=${6:-4}
CPU=1
HERE=$(cd "$(dirname "$0")" && pwd)
TM=${TILEMARK:-$HERE/../../.venv/bin/tilemark}
cd "$HERE/.."  # window.py runs as placement.window from bench/, beside the tmbench package
MASK=/sys/devices/virtual/workqueue/cpumask
old=$(cat $MASK)
trap 'echo "$old" > $MASK' EXIT
printf '%x' $((1 << CPU)) > $MASK
echo "# $RW $BS QD$QD on $DEV, tools and unbound workqueues on CPU $CPU, ${D} s windows, $(date -Is)"
for i in $(seq "$N"); do
  echo -n "fio      "; python3 -m placement.window "$D" "$DEV" -- taskset -c $CPU fio --name=x \
    --ioengine=io_uring --direct=1 --rw="$RW" --bs="$BS" --iodepth="$QD" --filename="$DEV" \
    --time_based --runtime=$((D + 3)) --randrepeat=0 --norandommap
  echo -n "tilemark "; python3 -m placement.window "$D" "$DEV" -- taskset -c $CPU "$TM" run \
    --target "$DEV" --rw "$RW" --bs "$BS" --qd "$QD" --align "$BS" --duration $((D + 2)) \
    --warmup 1 --json --results "${TMPDIR:-/tmp}/tilemark-pinned-results"
done
