#!/usr/bin/env bash
# `make demo`, after the build: four traced 2-rank training jobs on backend="ringx" and what
# ringx-trace and ringx-viewer make of them, each under a "==== N/6" heading so that the
# summaries, the what-if tables and the screenshots' paths are easy to find in the output.
#   1. ringx.ddp (samples/train_ddp.py, with torch.profiler for two steps): its summary; then
#      the what-if table of torch DDP's step on two network-namespace hosts joined by a 1 Gbit/s
#      link (scripts/demo_linked.py), the change that moves it most run for real under it (where
#      the hosts cannot be made, the one-host job's table);
#   2. the same job over TCP only (RINGX_TRANSPORT=tcp): the diff of the two runs;
#   3. ringx.fsdp (samples/train_fsdp.py): its summary and what-if table;
#   4. torch's own FSDP2 on the same model (samples/train_fsdp2.py), which ringx watches while
#      tracing: its summary and what-if table, beside ringx.fsdp's;
#   5. ringx-viewer screenshots of them (docs/images/, under Xvfb);
#   6. the commands that open them.
# Each sample's own lines (loss, time per step) are kept; the informational lines torch's
# profiler (Kineto) prints at its start and stop are not.
#   scripts/demo.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
PYTHON=$(scripts/find_python.sh)
TRACE=$BUILD_DIR/demo-trace
rm -rf "$TRACE" "$TRACE"-linked* "$TRACE-tcp" "$TRACE-fsdp" "$TRACE-fsdp2"

heading() { printf '\n==== %s\n\n' "$*"; }
# A sample on 2 ranks; Kineto's "USDT:"/"STAGE:" lines (profiler_start, Completed Stage: ...)
# dropped, its warnings and errors kept.
sample() {
  PYTHONPATH=$BUILD_DIR/python "$PYTHON" "$@" --world-size 2 \
    2> >(grep -v -E '^(USDT|STAGE):[0-9]{4}-' >&2)
}
trace() { "$BUILD_DIR/bin/ringx-trace" "$@"; }

heading "1/6  ringx.ddp: samples/train_ddp.py on 2 ranks, traced into $TRACE"
sample samples/train_ddp.py --trace "$TRACE" --profile
heading "1/6  summary: ringx-trace summary $TRACE"
trace summary "$TRACE"
heading "1/6  what if, across two hosts joined by a 1 Gbit/s link (the step replayed with one thing changed, then that change run for real)"
# scripts/demo_linked.py exits 3, having said why, where the hosts cannot be made here.
linked=0
PYTHONPATH=$BUILD_DIR/python "$PYTHON" scripts/demo_linked.py "$BUILD_DIR" "$TRACE-linked" || linked=$?
if [ "$linked" = 3 ]; then
  trace whatif "$TRACE"
elif [ "$linked" != 0 ]; then
  exit "$linked"
fi

heading "2/6  the same job over TCP only (RINGX_TRANSPORT=tcp), traced into $TRACE-tcp"
RINGX_TRANSPORT=tcp sample samples/train_ddp.py --trace "$TRACE-tcp" --profile
heading "2/6  what changed: ringx-trace diff $TRACE $TRACE-tcp"
trace diff "$TRACE" "$TRACE-tcp" --top 8

heading "3/6  ringx.fsdp: samples/train_fsdp.py on 2 ranks, traced into $TRACE-fsdp"
sample samples/train_fsdp.py --trace "$TRACE-fsdp"
heading "3/6  summary: ringx-trace summary $TRACE-fsdp"
trace summary "$TRACE-fsdp"
heading "3/6  what if: ringx-trace whatif $TRACE-fsdp"
trace whatif "$TRACE-fsdp"

heading "4/6  torch's FSDP2 (fully_shard): samples/train_fsdp2.py on 2 ranks, traced into $TRACE-fsdp2"
sample samples/train_fsdp2.py --trace "$TRACE-fsdp2"
heading "4/6  summary: ringx-trace summary $TRACE-fsdp2 (units watched in torch's own engine)"
trace summary "$TRACE-fsdp2"
heading "4/6  what if: ringx-trace whatif $TRACE-fsdp2 (beside ringx.fsdp's, 3/6)"
trace whatif "$TRACE-fsdp2"

heading "5/6  ringx-viewer screenshots (under Xvfb)"
scripts/demo_screenshots.sh "$BUILD_DIR"

heading "6/6  open them"
echo "  $BUILD_DIR/bin/ringx-viewer $TRACE            # the DDP job (or $TRACE-fsdp, $TRACE-fsdp2)"
echo "  $BUILD_DIR/bin/ringx-viewer --diff $TRACE $TRACE-tcp   # the two runs side by side"
echo "  $BUILD_DIR/bin/ringx-trace diff $TRACE-fsdp $TRACE-fsdp2   # ringx.fsdp against FSDP2"
