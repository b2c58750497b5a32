#!/usr/bin/env bash
# Screenshots of ringx-viewer on the traces `make demo` recorded, for the README and docs/viewer.md:
#   docs/images/viewer-timeline.png  the DDP job's timeline, zoomed to a few iterations
#   docs/images/viewer-ddp.png       its DDP panel (iteration breakdown, buckets)
#   docs/images/viewer-whatif.png    its What-if panel (the critical path on the timeline)
#   docs/images/viewer-profiler.png  the DDP job's torch.profiler steps under its ringx lanes
#   docs/images/viewer-diff.png      the DDP job against its TCP-only run (--diff), at the
#                                    largest regression
#   docs/images/viewer-fsdp.png      the FSDP job's units
#   docs/images/viewer-memory.png    the FSDP job's memory counters with their peaks
# Rendered under Xvfb with Mesa's llvmpipe, like the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
OUT=docs/images
mkdir -p "$OUT"
viewer() { xvfb-run -a -s "-screen 0 1920x1080x24" "$BUILD_DIR/bin/ringx-viewer" --frames 5 "$@"; }
viewer "$BUILD_DIR/demo-trace" --zoom 150:175 --panel collectives --screenshot "$OUT/viewer-timeline.png"
viewer "$BUILD_DIR/demo-trace" --panel ddp --screenshot "$OUT/viewer-ddp.png"
viewer "$BUILD_DIR/demo-trace" --panel whatif --screenshot "$OUT/viewer-whatif.png"
viewer "$BUILD_DIR/demo-trace" "$BUILD_DIR"/demo-trace/rank*.pt.trace.json --search ProfilerStep \
  --screenshot "$OUT/viewer-profiler.png"
viewer --diff "$BUILD_DIR/demo-trace" "$BUILD_DIR/demo-trace-tcp" --diff-row 1 \
  --screenshot "$OUT/viewer-diff.png"
viewer "$BUILD_DIR/demo-trace-fsdp" --panel fsdp --screenshot "$OUT/viewer-fsdp.png"
viewer "$BUILD_DIR/demo-trace-fsdp" --panel memory --screenshot "$OUT/viewer-memory.png"
echo "viewer screenshots in $OUT/: $(cd "$OUT" && echo viewer-*.png)"
