#!/usr/bin/env bash
# `make demo`, after the build: three traced 2-rank training jobs on backend="ringx" and what
# ringx-trace and ringx-viewer make of them, each under a "==== N/5" heading so that the
# summaries, the what-if table and the screenshots' paths are easy to find in the output.
#   1. ringx.ddp (samples/train_ddp.py, with torch.profiler for two steps): its summary and
#      the what-if table of its step;
#   2. the same job over TCP only (RINGX_TRANSPORT=tcp): the diff of the two runs;
#   3. ringx.fsdp (samples/train_fsdp.py): its summary;
#   4. ringx-viewer screenshots of them (docs/images/, under Xvfb);
#   5. the commands that open them.
# Each sample's own lines (loss, time per step) are kept; the informational lines torch's
# profiler (Kineto) prints at its start and stop are not.
#   scripts/demo.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
PYTHON=$(scripts/find_python.sh)
TRACE=$BUILD_DIR/demo-trace
rm -rf "$TRACE" "$TRACE-tcp" "$TRACE-fsdp"

heading() { printf '\n==== %s\n\n' "$*"; }
# A sample on 2 ranks; Kineto's "USDT:"/"STAGE:" lines (profiler_start, Completed Stage: ...)
# dropped, its warnings and errors kept.
sample() {
  PYTHONPATH=$BUILD_DIR/python "$PYTHON" "$@" --world-size 2 \
    2> >(grep -v -E '^(USDT|STAGE):[0-9]{4}-' >&2)
}
trace() { "$BUILD_DIR/bin/ringx-trace" "$@"; }

heading "1/5  ringx.ddp: samples/train_ddp.py on 2 ranks, traced into $TRACE"
sample samples/train_ddp.py --trace "$TRACE" --profile
heading "1/5  summary: ringx-trace summary $TRACE"
trace summary "$TRACE"
heading "1/5  what if: ringx-trace whatif $TRACE (the step replayed with one thing changed)"
trace whatif "$TRACE"

heading "2/5  the same job over TCP only (RINGX_TRANSPORT=tcp), traced into $TRACE-tcp"
RINGX_TRANSPORT=tcp sample samples/train_ddp.py --trace "$TRACE-tcp" --profile
heading "2/5  what changed: ringx-trace diff $TRACE $TRACE-tcp"
trace diff "$TRACE" "$TRACE-tcp" --top 8

heading "3/5  ringx.fsdp: samples/train_fsdp.py on 2 ranks, traced into $TRACE-fsdp"
sample samples/train_fsdp.py --trace "$TRACE-fsdp"
heading "3/5  summary: ringx-trace summary $TRACE-fsdp"
trace summary "$TRACE-fsdp"

heading "4/5  ringx-viewer screenshots (under Xvfb)"
scripts/demo_screenshots.sh "$BUILD_DIR"

heading "5/5  open them"
echo "  $BUILD_DIR/bin/ringx-viewer $TRACE            # the DDP job (or $TRACE-fsdp)"
echo "  $BUILD_DIR/bin/ringx-viewer --diff $TRACE $TRACE-tcp   # the two runs side by side"
echo "  $BUILD_DIR/bin/ringx-trace whatif $TRACE-fsdp   # the FSDP step's what-if table"
