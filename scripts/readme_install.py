#!/usr/bin/env python3
"""The README's install, run as a user runs it: the one check behind `make pip-check` and the
installed releases of `make torch-matrix`.

Given a fresh virtual environment that holds a torch release (and nothing else of ringx's),
it copies the source tree as a clone has it (tracked and untracked, not ignored, files: no
build/, no .venv) into OUT/source, activates the environment as `source bin/activate` would,
runs the commands of the README's Install block there one by one, exactly as the README
prints them (read from README.md at each run, so that a changed README is what gets tested),
and then, from a folder outside the source tree, a 2-rank torchrun job over backend="ringx"
without `import ringx` (torch loads it through its entry point): an all-reduce and a torch
DDP step whose averaged gradient is checked. docs/install.md's install commands must be the
README's.

  scripts/readme_install.py --python VENV/bin/python [--out DIR]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What a user does first with a fresh install: a 2-rank torchrun job on backend="ringx", with no
# `import ringx` (torch loads it through its entry point): an all-reduce, then a torch DDP step
# whose averaged gradient is checked.
TORCHRUN_JOB = """
import torch, torch.distributed as dist
dist.init_process_group("ringx")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.full((4,), float(rank + 1))
dist.all_reduce(t)
assert t.tolist() == [world * (world + 1) / 2] * 4, t
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1, bias=False))
model(torch.full((1, 4), float(rank + 1))).sum().backward()
expected = sum(r + 1 for r in range(world)) / world
assert torch.allclose(model.module.weight.grad, torch.full((1, 4), expected)), model.module.weight.grad
print(f"rank {rank}: all_reduce and a DDP step over {dist.get_backend()}: ok")
dist.destroy_process_group()
"""


def shell_block(path, heading):
    """The lines of the first ```sh block under `heading` (a Markdown heading line) in path."""
    with open(path) as f:
        text = f.read()
    start = text.find(f"\n{heading}\n")
    block = re.search(r"^```sh\n(.*?)^```", text[start:], re.M | re.S) if start >= 0 else None
    if block is None:
        raise SystemExit(f"readme_install: no ```sh block under '{heading}' in {path}")
    return [line for line in block.group(1).splitlines() if line.strip()]


def pip_lines(lines):
    """The pip commands among a block's lines, without their comments."""
    return [line.split("#")[0].strip() for line in lines if line.startswith("pip ")]


def readme_commands():
    """The README's install commands, and a check that docs/install.md gives the same."""
    readme = shell_block(os.path.join(REPO, "README.md"), "## Install")
    docs = shell_block(os.path.join(REPO, "docs", "install.md"), "## Installing with pip")
    if pip_lines(readme) != pip_lines(docs):
        raise SystemExit("readme_install: README.md's install commands "
                         f"{pip_lines(readme)} differ from docs/install.md's {pip_lines(docs)}")
    return readme


def copy_source(dest):
    """The source tree as a clone of it holds it (with uncommitted changes), at dest."""
    shutil.rmtree(dest, ignore_errors=True)
    files = subprocess.run(["git", "ls-files", "-z", "-c", "-o", "--exclude-standard"], cwd=REPO,
                           check=True, capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, files):
        src = os.path.join(REPO, name)
        if os.path.isfile(src):  # (a file deleted but not yet committed is listed, absent)
            os.makedirs(os.path.dirname(os.path.join(dest, name)), exist_ok=True)
            shutil.copy2(src, os.path.join(dest, name))


def activated(python, env):
    """env as `source VENV/bin/activate` leaves it, with no PYTHONPATH (the installed ringx,
    never build/python)."""
    bin_dir = os.path.dirname(os.path.abspath(python))
    env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["VIRTUAL_ENV"] = os.path.dirname(bin_dir)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    return env


def run(python, out, env=None):
    """Runs the README's install in the environment of `python`, then the torchrun job.
    Returns {"commands": [...], "install": bool, "failed": command or None, "torchrun": bool},
    with every command's output in OUT/install.log and the job's in OUT/torchrun.log."""
    os.makedirs(out, exist_ok=True)
    env = activated(python, dict(os.environ if env is None else env))
    commands = readme_commands()
    source = os.path.join(out, "source")
    copy_source(source)
    result = {"commands": commands, "install": True, "failed": None, "torchrun": False}
    with open(os.path.join(out, "install.log"), "w") as log:
        for command in commands:
            log.write(f"\n$ {command}\n")
            log.flush()
            if subprocess.run(["bash", "-c", command], cwd=source, env=env, stdout=log,
                              stderr=subprocess.STDOUT).returncode != 0:
                result.update(install=False, failed=command)
                return result
    job_dir = os.path.join(out, "job")
    os.makedirs(job_dir, exist_ok=True)
    with open(os.path.join(job_dir, "job.py"), "w") as f:
        f.write(TORCHRUN_JOB)
    with open(os.path.join(out, "torchrun.log"), "w") as log:
        rc = subprocess.run(["torchrun", "--standalone", "--nproc-per-node", "2", "job.py"],
                            cwd=job_dir, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    # Counted, not matched by line: the two ranks write to one log, and their lines can run
    # together ("...: okrank 1: ...").
    with open(os.path.join(out, "torchrun.log")) as f:
        oks = f.read().count("over ringx: ok")
    result["torchrun"] = rc == 0 and oks == 2
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", required=True, help="the fresh environment's python")
    parser.add_argument("--out", default=os.path.join(REPO, "build", "readme-install"))
    args = parser.parse_args()
    result = run(args.python, args.out)
    for command in result["commands"]:
        print(f"readme_install: $ {command}")
    if not result["install"]:
        print(f"readme_install: FAILED at `{result['failed']}`; the tail of {args.out}/install.log:")
        with open(os.path.join(args.out, "install.log")) as f:
            sys.stdout.writelines(f.readlines()[-40:])
        return 1
    with open(os.path.join(args.out, "torchrun.log")) as f:
        log = f.read()
    print("".join(f"readme_install: {line}\n" for line in log.splitlines() if "over ringx" in line),
          end="")
    if not result["torchrun"]:
        print(f"readme_install: the torchrun job FAILED; {args.out}/torchrun.log:\n{log[-4000:]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
