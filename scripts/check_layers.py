#!/usr/bin/env python3
"""The layering check: no #include runs from a lower folder up to a higher one.

The map below is the architecture (the README's "Layout", docs/layout.md): each folder
and the folders it may include, directly or through them. A folder's subfolders belong to it
unless they are listed themselves (backend/transport/tcp is its own folder: a transport kind
may include the transport interface, never the other way round). Tests, benchmarks and samples
may include anything and are not checked; nothing may include them.

    python3 scripts/check_layers.py          # exit 1 and one line per include that runs upward
    python3 scripts/check_layers.py --graph  # the folders and what each includes, as found
    python3 scripts/check_layers.py --extension build/python/ringx/_C*.so
        # also: the Python extension defines nothing of the trace column above trace/record

make test runs it (scripts/run_tests.sh, the "layers" suite).
"""
import argparse
import glob
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# folder: folders it may include (each of those brings what it may include in turn).
LAYERS = {
    "base": [],
    # The trace column: the format both sides share, the recorder the runtime links, and the
    # readers, model, analyses and programs that work on what was recorded.
    "trace/format": ["base"],
    "trace/record": ["trace/format"],
    "trace/read": ["trace/format"],
    "trace/export": ["trace/read"],
    "trace/model": ["trace/read"],
    "analysis": ["trace/model", "analysis/figures", "analysis/replay"],
    "tools/ringx_trace": ["analysis", "trace/export"],
    "viewer/ui": ["analysis"],
    "viewer/app": ["viewer/ui"],
    # The runtime column: torch-free from store to group, then the torch-facing glue.
    "backend/store": ["base"],
    "backend/bootstrap": ["backend/store"],
    "backend/transport": ["backend/bootstrap"],
    "backend/transport/tcp": ["backend/transport"],
    "backend/transport/shm": ["backend/transport"],
    # NCCL loaded at run time (loader.h): the CUDA wire between hosts (RINGX_GPU_WIRE=nccl).
    "backend/transport/nccl": ["backend/transport"],
    "backend/reduce": ["base"],
    # The device ring's protocol, its host side and its CPU instance (host memory shared
    # between processes: a shm segment); the CUDA instance lives in backend/device/cuda.
    "backend/device/ring": ["backend/store", "backend/transport/shm", "backend/reduce"],
    "backend/device": ["backend/transport", "backend/reduce", "backend/device/ring"],  # PatientWaits
    "backend/algorithms": ["backend/transport", "backend/reduce"],
    "backend/group": ["backend/algorithms", "backend/device", "trace/record"],
    "backend/c10d": ["backend/group"],
    # The engines, at the top as the design names them; what both share (the start-up checks,
    # the C++ front ends' helpers) is the torch-facing glue's, in backend/c10d.
    "ddp": ["backend/c10d", "analysis/replay"],  # bucket plans, bucket_cap_mb="auto"
    "fsdp": ["backend/c10d"],
    # torch's own DDP and FSDP2 watched, beside each engine: their events in its vocabulary,
    # torch-free bookkeeping; observe/ is where the watches meet torch (its RecordFunction
    # callbacks), above both.
    "ddp/watch": ["ddp"],
    "fsdp/watch": ["fsdp"],
    "observe": ["ddp/watch", "fsdp/watch"],
    "python/bindings": ["ddp", "fsdp", "observe", "analysis/figures",
                        "backend/transport/nccl"],  # ringx.nccl()
    # The figures are analysis's, but torch-free and dependency-free: the engines' Python face
    # reports them too (ringx.analysis, last_iteration()).
    "analysis/figures": ["base"],
    # The replay model of a step (bucket plans, the collective cost model, the DDP replay):
    # torch-free and trace-free, so the DDP engine plans its buckets with it and "auto" replays.
    "analysis/replay": ["analysis/figures"],
}
# Files that belong to a folder of their own in the map (the figures live in analysis/).
FILE_UNITS = {"analysis/figures.h": "analysis/figures", "analysis/figures.cc": "analysis/figures"}
UNCHECKED = ("tests/", "bench/", "samples/")
SOURCES = (".h", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def unit_of(path):
    """The folder of the map that `path` belongs to (the longest that contains it), or None."""
    if path in FILE_UNITS:
        return FILE_UNITS[path]
    best = None
    for unit in LAYERS:
        if path.startswith(unit + "/") and (best is None or len(unit) > len(best)):
            best = unit
    return best


def allowed(unit):
    """Every folder `unit` may include: its own, and what its map entry reaches."""
    seen, todo = {unit}, list(LAYERS[unit])
    while todo:
        u = todo.pop()
        if u not in seen:
            seen.add(u)
            todo.extend(LAYERS[u])
    return seen


def sources():
    for top in sorted(os.listdir(REPO)):
        if top.startswith(".") or top.startswith("build") or not os.path.isdir(os.path.join(REPO, top)):
            continue
        for dirpath, dirnames, filenames in os.walk(os.path.join(REPO, top)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith(SOURCES):
                    yield os.path.relpath(os.path.join(dirpath, name), REPO)


def check():
    """(problems, edges): the includes that break the map, and every folder-to-folder include."""
    problems, edges = [], {}
    for path in sources():
        checked = not path.startswith(UNCHECKED)
        unit = unit_of(path)
        if checked and unit is None:
            problems.append(f"{path}: in no folder of the map (scripts/check_layers.py's LAYERS)")
            continue
        with open(os.path.join(REPO, path), errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1)
                if target.startswith(UNCHECKED):
                    if checked:
                        problems.append(f"{path}:{number}: includes {target}: nothing includes tests, "
                                        "benchmarks or samples")
                    continue
                if not checked:
                    continue
                to = unit_of(target)
                if to is None:
                    continue  # a header beside the file (pybind, CUDA), not one of ours by path
                edges.setdefault(unit, set()).add(to)
                if to not in allowed(unit):
                    problems.append(f"{path}:{number}: {unit} includes {target} ({to}), which it may "
                                    f"not: {unit} may include {', '.join(sorted(allowed(unit) - {unit})) or 'nothing'}")
    return problems, edges


# What a training job links of the trace column: the format and the recorder. Readers, the model,
# the exporters and the analyses are the tools' (a job never reads a trace).
NOT_IN_EXTENSION = ["trace/read", "trace/export", "trace/model", "analysis"]
DECLARED = re.compile(r"^(?:class|struct)\s+(\w+)\s*(?:final\s*)?[:{]|^[A-Za-z_][\w:<>,*& ]*?[\s*&](\w+)\(",
                      re.M)


def declared_names(folder):
    """Classes and functions a folder's headers (or one header) declare at column 0."""
    names = set()
    paths = [folder] if folder.endswith(".h") else glob.glob(os.path.join(REPO, folder, "*.h"))
    for header in paths:
        with open(os.path.join(REPO, header), errors="replace") as f:
            for m in DECLARED.finditer(f.read()):
                names.add(m.group(1) or m.group(2))
    return names - {None, "operator"}


def check_extension(path):
    """Problems: symbols the extension defines that belong to a folder it must not link."""
    out = subprocess.run(["nm", "-C", "--defined-only", path], check=True, capture_output=True,
                         text=True).stdout
    defined = [line.split(" ", 2)[2] for line in out.splitlines() if line.count(" ") >= 2]
    if not defined:
        return [f"{path}: nm found no symbols"]
    problems = []
    for folder in NOT_IN_EXTENSION:
        names = declared_names(folder)
        if folder == "analysis":  # the figures are torch-free and the engines report them
            names -= declared_names("analysis/figures.h")
        pattern = re.compile(r"\bringx::(?:trace|model|analysis)::(?:\w+::)*(?:" +
                             "|".join(sorted(map(re.escape, names))) + r")\b")
        for hit in sorted({m.group(0) for sym in defined for m in [pattern.search(sym)] if m}):
            problems.append(f"{os.path.basename(path)} defines {hit} ({folder}): the extension "
                            "links only trace/format and trace/record of the trace column")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", action="store_true", help="print what each folder includes")
    parser.add_argument("--extension", metavar="SO", help="also check the built _C extension's symbols")
    args = parser.parse_args()
    for unit, deps in LAYERS.items():  # the map itself must name only its own folders
        for d in deps:
            if d not in LAYERS:
                sys.exit(f"check_layers: {unit} lists {d}, which is not in LAYERS")
    problems, edges = check()
    if args.extension:
        problems += check_extension(args.extension)
    if args.graph:
        for unit in LAYERS:
            print(f"{unit:24s} -> {', '.join(sorted(edges.get(unit, set()) - {unit})) or '-'}")
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} problem(s) with the layering", file=sys.stderr)
        return 1
    print(f"check_layers: every include follows the layering ({len(LAYERS)} folders)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
