#!/usr/bin/env bash
# Installs what ringx needs, and only what is missing; quiet when everything is there.
#   1. Debian packages: compilers, CMake, GoogleTest, the viewer's libraries, Xvfb (needs root
#      or sudo).
#   2. The Python environment .venv (skipped when RINGX_PYTHON names another interpreter):
#      made from a Python 3.11 (the torch wheel's version) with the packages pinned in
#      scripts/requirements.txt; re-installed when that file changes.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake make git
  libgtest-dev
  nlohmann-json3-dev     # ringx-trace export/import, the viewer's Chrome-trace reader
  libcli11-dev           # the command lines of ringx-trace, ringx-viewer and the C++ samples
  # ringx-viewer: Dear ImGui (GLFW + OpenGL3 backends inside libimgui.a), GLFW, stb
  # (font packing, PNG screenshots), simdjson and zlib (Chrome traces, .json.gz), and for tests and
  # screenshots a virtual display with Mesa's llvmpipe OpenGL.
  libimgui-dev libglfw3-dev libstb-dev libgl-dev libsimdjson-dev zlib1g-dev
  xvfb xauth libgl1-mesa-dri
  # scripts/sanitizers.sh: clang and its runtimes for the ASan/UBSan + libFuzzer build; make format
  clang-14 libclang-rt-14-dev clang-format-14
  # bench/vs_libraries.py: OpenMPI, an anchor for the collectives, through Debian's python3;
  # libfabric for oneCCL's OFI transport (scripts/oneccl_setup.sh fetches oneCCL itself)
  openmpi-bin python3-mpi4py python3-numpy libfabric1
  # bench/tcp_line_rate.py: iperf3, the line rate ringx's TCP allreduce is held against
  # (noninteractive: its question whether to start a daemon keeps the default, no)
  iperf3
  # bench/call_cost.py: perf, which samples where a torch call's CPU goes
  linux-perf
)

# A Python 3.11 that can make virtual environments: python3.11 or python3 on PATH, else
# Debian's (which needs python3-venv).
base_python() {
  local candidate
  for candidate in "${RINGX_BASE_PYTHON:-}" python3.11 python3 /usr/bin/python3; do
    [ -n "$candidate" ] || continue
    command -v "$candidate" >/dev/null 2>&1 || continue
    if "$candidate" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info[:2] != (3, 11))' \
      >/dev/null 2>&1; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

if [ -z "${RINGX_PYTHON:-}" ] && ! base_python >/dev/null; then
  PACKAGES+=(python3 python3-venv python3-dev)
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
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
  # (debconf's "delaying package configuration, since apt-utils is not installed": noise)
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    2> >(grep -v '^debconf: delaying package configuration' >&2)
fi

[ -z "${RINGX_PYTHON:-}" ] || exit 0
VENV=.venv
STAMP=$VENV/.ringx-requirements
if [ -x $VENV/bin/python ] && cmp -s scripts/requirements.txt "$STAMP"; then
  exit 0
fi
if [ ! -x $VENV/bin/python ]; then
  base=$(base_python) || {
    echo "ringx setup: no Python 3.11 with venv found (torch 2.13's wheel is for 3.11)" >&2
    exit 1
  }
  echo "ringx setup: creating $VENV from $base"
  "$base" -m venv $VENV
fi
echo "ringx setup: installing scripts/requirements.txt into $VENV (torch takes a minute)"
# (pip warns about every index location this machine's pip.conf names but lacks: noise)
$VENV/bin/python -m pip install -q --disable-pip-version-check -r scripts/requirements.txt \
  2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)
cp scripts/requirements.txt "$STAMP"
echo "ringx setup: done"
