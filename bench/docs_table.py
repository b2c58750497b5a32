#!/usr/bin/env python3
"""Puts a benchmark's table into the docs: replaces what stands between the two markers that
name it,

    <!-- BEGIN name -->
    ...
    <!-- END name -->

and nothing else. The markers must already be in the file, once each; nothing is created.

A bench/*.py script does it after its run when given --docs (table(): what it printed inside,
written afterwards). A C++ benchmark's output is piped in; it is echoed, and written in a
```text fence (--markdown: as it is):

    build/bin/bench_scale_cost 16,64,256,512,1024 |
        python3 bench/docs_table.py docs/benchmarks.md scale_cost
"""

import argparse
import contextlib
import io
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, "docs", "benchmarks.md")
FLAG_HELP = "after the run, write the table into docs/benchmarks.md (bench/docs_table.py)"


def markers(name):
    return f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"


def check(path, name):
    """The file's text, or ValueError unless it holds BEGIN and END of `name` once each, in
    that order."""
    with open(path) as f:
        doc = f.read()
    begin, end = markers(name)
    if doc.count(begin) != 1 or doc.count(end) != 1 or doc.index(begin) > doc.index(end):
        raise ValueError(f"{path}: needs `{begin}` and then `{end}`, once each")
    return doc


def replace(path, name, text):
    """Replaces the text between the markers of `name` in the file at `path` with `text`
    (a blank line on either side, so that a table or a fence stands on its own)."""
    doc = check(path, name)
    begin, end = markers(name)
    head, rest = doc.split(begin)
    _, tail = rest.split(end)
    body = text.strip("\n")
    with open(path, "w") as f:
        f.write(f"{head}{begin}\n\n{body}\n\n{end}{tail}")


def require(*names, path=BENCHMARKS):
    """check() every name before a long run, so that --docs fails at once, not at the end."""
    for name in names:
        try:
            check(path, name)
        except (OSError, ValueError) as e:
            raise SystemExit(f"docs_table: {e}")


def fenced(text):
    """A printed block as it looked in the terminal."""
    return "```text\n" + text.strip("\n") + "\n```"


def write(name, text, path=BENCHMARKS):
    """replace() in docs/benchmarks.md, saying so on stderr (stdout is the benchmark's)."""
    replace(path, name, text)
    print(f"docs_table: wrote {name} into {os.path.relpath(path)}", file=sys.stderr)


class _Tee(io.TextIOBase):
    def __init__(self, out):
        self.out, self.seen = out, io.StringIO()

    def write(self, text):
        self.seen.write(text)
        return self.out.write(text)

    def flush(self):
        self.out.flush()

    def fileno(self):
        return self.out.fileno()

    def isatty(self):
        return self.out.isatty()

    def text(self):
        return self.seen.getvalue()


@contextlib.contextmanager
def captured():
    """What this process prints inside the block, printed as before and kept: `.text()`. (The
    rank processes' own output is not in it.)"""
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield tee


@contextlib.contextmanager
def table(docs, name, as_docs=fenced, path=BENCHMARKS):
    """Around the code that prints `name`'s table: printed as before and, with `docs`, written
    between its markers afterwards (as as_docs() makes it of the printed text)."""
    with captured() as printed:
        yield printed
    if docs:
        write(name, as_docs(printed.text()), path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("doc", help="the markdown file, e.g. docs/benchmarks.md")
    parser.add_argument("name", help="the markers' name")
    parser.add_argument("--markdown", action="store_true",
                        help="write the input as it is, not in a ```text fence")
    args = parser.parse_args()
    require(args.name, path=args.doc)  # before waiting on the benchmark
    lines = []
    for line in sys.stdin:  # echoed as it comes: a benchmark can take minutes
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line)
    text = "".join(lines)
    if not text.strip():
        raise SystemExit(f"docs_table: nothing on stdin; {args.doc} left as it was")
    replace(args.doc, args.name, text if args.markdown else fenced(text))
    print(f"docs_table: wrote {args.name} into {args.doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
