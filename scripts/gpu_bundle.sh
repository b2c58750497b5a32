#!/usr/bin/env bash
# `make gpu-bundle`: what the GPU machine lacks for ringx's build, in build/gpu-bundle (git-ignored),
# to travel with the working tree (the device tool's `carry`): GoogleTest's sources (built there
# by scripts/gpu_check.sh), nlohmann-json and CLI11 (headers and CMake files). Debian packages,
# fetched with apt-get download and unpacked with dpkg -x: about 5 MB. The GPU machine has no
# network and no apt; it has CMake, nvcc, torch and pybind11.
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE=build/gpu-bundle
PACKAGES=(googletest nlohmann-json3-dev libcli11-dev)

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/debs"
# (apt warns that its sandbox user cannot write here and downloads as root: harmless)
(cd "$BUNDLE/debs" && apt-get download -qq "${PACKAGES[@]}" 2> >(grep -v 'unsandboxed as root' >&2))
for deb in "$BUNDLE"/debs/*.deb; do
  dpkg -x "$deb" "$BUNDLE/root"
done
rm -rf "$BUNDLE/debs" "$BUNDLE/root/usr/share/doc"
echo "gpu-bundle: ${PACKAGES[*]} in $BUNDLE ($(du -sh "$BUNDLE" | cut -f1)); carry it with the" \
  "working tree, then scripts/gpu_check.sh uses it"
