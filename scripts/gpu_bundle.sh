#!/usr/bin/env bash
# `make gpu-bundle`: what the GPU machine lacks for ringx's build, in build/gpu-bundle (git-ignored),
# to travel with the working tree (the device tool's `carry`): GoogleTest's sources (built there
# by scripts/gpu_check.sh), nlohmann-json and CLI11 (headers and CMake files), and for ringx-trace
# (the GPU tests of the torch-engine watcher read their traces with it) simdjson and zlib (headers
# and libraries; the binary finds them through its build RPATH). Debian packages, fetched with
# apt-get download and unpacked with dpkg -x: about 7 MB. The GPU machine has no network and no
# apt; it has CMake, nvcc, torch and pybind11.
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE=build/gpu-bundle
PACKAGES=(googletest nlohmann-json3-dev libcli11-dev libsimdjson-dev libsimdjson14 zlib1g-dev zlib1g)

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/debs"
# (apt warns that its sandbox user cannot write here and downloads as root: harmless)
(cd "$BUNDLE/debs" && apt-get download -qq "${PACKAGES[@]}" 2> >(grep -v 'unsandboxed as root' >&2))
for deb in "$BUNDLE"/debs/*.deb; do
  dpkg -x "$deb" "$BUNDLE/root"
done
rm -rf "$BUNDLE/debs" "$BUNDLE/root/usr/share/doc"
# A link to an absolute path (zlib1g-dev's libz.so -> /lib/...) would point outside the bundle
# there: point it at the bundle's own copy.
find "$BUNDLE/root" -type l -lname '/*' | while read -r link; do
  ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$BUNDLE/root$(readlink "$link")")" "$link"
done
echo "gpu-bundle: ${PACKAGES[*]} in $BUNDLE ($(du -sh "$BUNDLE" | cut -f1)); carry it with the" \
  "working tree, then scripts/gpu_check.sh uses it"
