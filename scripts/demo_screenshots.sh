#!/usr/bin/env bash
# Screenshots of ringx-viewer on the traces `make demo` recorded (scripts/demo.sh), for the
# README and docs/viewer.md: docs/images/viewer-*.png, each listed with what it shows as it is
# taken. Rendered under Xvfb with Mesa's llvmpipe, like the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
OUT=docs/images
mkdir -p "$OUT"
# One virtual display for all of them, of this script's own (tests/python/virtual_display.py):
# the script runs itself again under it.
if [ -z "${RINGX_SCREENSHOT_DISPLAY:-}" ]; then
  exec env RINGX_SCREENSHOT_DISPLAY=1 "$(scripts/find_python.sh)" tests/python/virtual_display.py \
    "$PWD/scripts/demo_screenshots.sh" "$@"
fi
viewer() { "$BUILD_DIR/bin/ringx-viewer" --frames 5 "$@"; }
# shot FILE WHAT ARGS...: one screenshot, then its line: where it is and what it shows.
shot() {
  local file=$OUT/$1 what=$2
  shift 2
  viewer "$@" --screenshot "$file"
  printf '  %-32s %s\n' "$file" "$what"
}
shot viewer-timeline.png "the DDP job's timeline, a few iterations" \
  "$BUILD_DIR/demo-trace" --zoom-steps 40:42 --panel collectives
shot viewer-ddp.png "its DDP panel: iteration breakdown, buckets" "$BUILD_DIR/demo-trace" --panel ddp
shot viewer-whatif.png "its What-if panel, the critical path on the timeline" \
  "$BUILD_DIR/demo-trace" --panel whatif
shot viewer-profiler.png "torch.profiler's steps under the ringx lanes" \
  "$BUILD_DIR/demo-trace" "$BUILD_DIR"/demo-trace/rank*.pt.trace.json --search ProfilerStep
shot viewer-diff.png "the DDP job against its TCP run, at the largest regression" \
  --diff "$BUILD_DIR/demo-trace" "$BUILD_DIR/demo-trace-tcp" --diff-row 1
shot viewer-fsdp.png "the FSDP job's units" "$BUILD_DIR/demo-trace-fsdp" --panel fsdp
shot viewer-memory.png "the FSDP job's memory counters, with their peaks" \
  "$BUILD_DIR/demo-trace-fsdp" --panel memory
shot viewer-fsdp2.png "torch's FSDP2 on the same model: its units, watched" \
  "$BUILD_DIR/demo-trace-fsdp2" --panel fsdp
