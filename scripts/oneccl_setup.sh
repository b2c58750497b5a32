#!/usr/bin/env bash
# Sets up Intel oneCCL for bench/vs_libraries.py, and only what is missing; quiet when it is
# all there. bench/vs_libraries.py runs it before its first oneCCL run.
#
#   scripts/oneccl_setup.sh [fetch]     (fetch: download and unpack only, no compiling)
#
# Into $RINGX_ONECCL_PREFIX (default build/oneccl), from PyPI with the project's pip
# (`pip download --no-deps`, pinned versions; nothing is installed into any environment):
#   oneccl-cpu          lib/libccl.so.1
#   oneccl-cpu-devel    include/ (its 200 MB static libraries are left in the wheel)
#   intel-cmplr-lib-rt  lib/libintlc.so.5: the Intel compiler runtime functions libccl.so.1
#                       calls (_intel_fast_memcpy, _intel_fast_memset, __intel_cpu_features_*)
#   impi-rt             Intel MPI's mpirun (hydra) and libmpi.so.12, in impi/: oneCCL's MPI
#                       transport
# and bin/oneccl_ranks, compiled from bench/oneccl_ranks.cc.
#
# Two things the wheels do not do for themselves:
#   - libccl.so.1 names a libccl.so.2 that no wheel ships (a packaging slip: the only symbols
#     it lacks are the four above, which libintlc.so.5 defines). lib/libccl.so.2 is a symlink
#     to libintlc.so.5, so the loader finds them under the name libccl.so.1 asks for.
#   - oneccl-cpu and impi-rt declare libfabric>=2.6, which is not on PyPI (hence --no-deps).
#     Both load libfabric at run time; Debian's libfabric1 (1.17) works with its shm provider
#     and is what the bench points them to (CCL_OFI_LIBRARY_PATH).
set -euo pipefail
cd "$(dirname "$0")/.."

ONECCL_VERSION=2022.2.0
CMPLR_RT_VERSION=2026.2.0
IMPI_VERSION=2021.19.0
PREFIX=${RINGX_ONECCL_PREFIX:-build/oneccl}
STAMP=$PREFIX/.ringx-oneccl
SOURCE=bench/oneccl_ranks.cc
WANT="oneccl $ONECCL_VERSION cmplr-rt $CMPLR_RT_VERSION impi $IMPI_VERSION $(cat $SOURCE bench/latency_method.h | cksum)"

fail() {
  echo "oneccl setup: $*" >&2
  exit 1
}

if [ "${1:-}" != fetch ] && [ -x "$PREFIX/bin/oneccl_ranks" ] && [ -f "$STAMP" ] &&
  [ "$(cat "$STAMP")" = "$WANT" ]; then
  exit 0
fi

PYTHON=$(scripts/find_python.sh)
[ -x "$PYTHON" ] || fail "no project Python ($PYTHON): run make setup first"
command -v c++ >/dev/null ||
  fail "no C++ compiler: apt-get install build-essential (make setup does)"
LDCONFIG=$(command -v ldconfig || echo /sbin/ldconfig)
"$LDCONFIG" -p | grep 'libfabric\.so\.1 ' >/dev/null ||
  fail "no libfabric.so.1 (oneCCL's OFI transport): apt-get install libfabric1 (make setup does)"

FETCHED=$PREFIX/.fetched
WANT_FETCH="oneccl $ONECCL_VERSION cmplr-rt $CMPLR_RT_VERSION impi $IMPI_VERSION"
if [ ! -f "$FETCHED" ] || [ "$(cat "$FETCHED")" != "$WANT_FETCH" ]; then
  echo "oneccl setup: downloading oneCCL $ONECCL_VERSION and Intel MPI $IMPI_VERSION from PyPI" \
    "(about 210 MB) into $PREFIX"
  rm -rf "$PREFIX"
  mkdir -p "$PREFIX/wheels"
  # (pip warns about every index location this machine's pip.conf names but lacks: noise)
  if ! "$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --only-binary :all: \
    -d "$PREFIX/wheels" "oneccl-cpu==$ONECCL_VERSION" "oneccl-cpu-devel==$ONECCL_VERSION" \
    "intel-cmplr-lib-rt==$CMPLR_RT_VERSION" "impi-rt==$IMPI_VERSION" \
    2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2); then
    fail "pip download from PyPI failed (no network, or a version gone?); rerun when PyPI is" \
      "reachable, or set RINGX_ONECCL_PREFIX to a prefix made by this script elsewhere"
  fi
  # Only what the bench uses comes out of the wheels (their data/ folder is the prefix).
  "$PYTHON" - "$PREFIX" <<'EOF' || fail "unpacking the wheels in $PREFIX/wheels failed"
import glob, os, re, shutil, stat, sys, zipfile

prefix = sys.argv[1]
wanted = {  # wheel name: (patterns of paths under data/, where they go under the prefix)
    "oneccl_cpu-": ([r"lib/libccl\.so\.1"], ""),
    "oneccl_cpu_devel-": ([r"include/.*"], ""),
    "intel_cmplr_lib_rt-": ([r"lib/libintlc\.so\.5"], ""),
    "impi_rt-": ([r"bin/(mpiexec\.hydra|hydra_pmi_proxy|hydra_bstrap_proxy)",
                  r"lib/libmpi\.so\.12", r"opt/mpi/etc/.*"], "impi/"),
}
for start, (patterns, under) in wanted.items():
    [wheel] = glob.glob(os.path.join(prefix, "wheels", start + "[0-9]*.whl"))
    count = 0
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            m = re.match(r"[^/]+\.data/data/(.*)", info.filename)
            if not m or info.is_dir() or not any(re.fullmatch(p, m.group(1)) for p in patterns):
                continue
            target = os.path.join(prefix, under, m.group(1))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with z.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            if (info.external_attr >> 16) & stat.S_IXUSR or "/bin/" in "/" + m.group(1):
                os.chmod(target, 0o755)
            count += 1
    if count == 0:
        sys.exit(f"nothing of {patterns} in {wheel}")
EOF
  ln -sf libccl.so.1 "$PREFIX/lib/libccl.so"
  ln -sf libintlc.so.5 "$PREFIX/lib/libccl.so.2"
  rm -rf "$PREFIX/wheels"
  echo "$WANT_FETCH" >"$FETCHED"
fi
[ "${1:-}" != fetch ] || exit 0

echo "oneccl setup: compiling $SOURCE into $PREFIX/bin/oneccl_ranks"
mkdir -p "$PREFIX/bin"
LIB=$(cd "$PREFIX/lib" && pwd)
# (ld warns that libccl.so.2, the symlink above, "may conflict with libccl.so.1": by its name only)
c++ -O2 -std=c++17 -I"$PREFIX/include" "$SOURCE" -o "$PREFIX/bin/oneccl_ranks" -L"$LIB" -lccl \
  -Wl,-rpath,"$LIB" 2> >(grep -v 'may conflict with libccl\.so\.1' >&2) ||
  fail "compiling $SOURCE against oneCCL's headers failed"
echo "$WANT" >"$STAMP"
