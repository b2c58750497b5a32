#!/usr/bin/env bash
# Installs the Debian packages ringx needs, and only those that are missing.
# Idempotent and quiet when everything is there. Needs root (or sudo) to install.
set -euo pipefail

PACKAGES=(
  build-essential cmake make git
  python3-torch libtorch-dev python3-pytest python3-numpy pybind11-dev
  libgtest-dev
  nlohmann-json3-dev     # ringx-trace export/import, the viewer's Chrome-trace reader
  libopenblas0-pthread   # without it Debian's torch runs the reference BLAS
  # ringx-viewer: Dear ImGui (GLFW + OpenGL3 backends inside libimgui.a), GLFW, stb
  # (font packing, PNG screenshots), simdjson (Chrome traces), and for tests and
  # screenshots a virtual display with Mesa's llvmpipe OpenGL.
  libimgui-dev libglfw3-dev libstb-dev libgl-dev libsimdjson-dev
  xvfb xauth libgl1-mesa-dri
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "ringx setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "ringx setup: missing packages (${missing[*]}) and not root; install them with apt-get" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "ringx setup: done"
