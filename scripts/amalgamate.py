#!/usr/bin/env python3
"""Writes simplechain.c, the file a user drops into a project beside simplechain.h, from the
source tree: the files of MANIFEST in order, each `#include "..."` of a file of the tree replaced
by that file's text (recursively; a file of ONCE only the first time), every other line as it is.

    python3 scripts/amalgamate.py [OUT]     (default: simplechain.c beside this folder)
    python3 scripts/amalgamate.py --check   exit 1 if simplechain.c is not what it would write

`make amalgamation` and `make check-amalgamation` run it. No dependency beyond Python 3's
standard library."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The engine's rooms in the order the generated file holds them (HACKING.md: the source tree),
# the built-in kernel sets last.
MANIFEST = [
    "src/internal.h",
    "src/error.c",
    "src/layers.c",
    "src/dispatch.c",
    "src/chain.c",
    "src/params.c",
    "src/fileio.c",
    "src/npz.c",
    "src/planner.c",
    "src/idx.c",
    "src/threads.c",
    "src/workspace.c",
    "src/precision.c",
    "src/bf16_model.c",
    "kernels/bf16/bf16.c",
    "kernels/amx/amx.c",
    "src/profile.c",
    "src/checks.c",
    "src/compute.c",
    "src/api.c",
    "src/optim.c",
    "src/checkpoint.c",
    "src/train.c",
    "src/builtin_sets.h",
]
# headers that are whole-file guarded and included at file level: inlined once
ONCE = {"src/internal.h", "src/util.h", "kernels/amx/blocking.h"}
# kept as an include: the public header, which ships beside the generated file
KEEP = {"simplechain.h"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"(.*)$')


def rel(path):
    return os.path.relpath(path, ROOT).replace(os.sep, "/")


def expand(path, out, done, stack):
    r = rel(path)
    if r in stack:
        sys.exit("amalgamate: %s includes itself (through %s)" % (r, " -> ".join(stack)))
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line in lines:
        m = INCLUDE.match(line)
        if not m:
            out.append(line)
            continue
        target = os.path.normpath(os.path.join(os.path.dirname(path), m.group(1)))
        t = rel(target)
        if t in KEEP:
            out.append('#include "%s"%s' % (t, m.group(2)))
        elif not os.path.isfile(target) or t.startswith(".."):
            out.append(line)  # not a file of the tree: left to the compiler
        elif t in ONCE and t in done:
            continue
        else:
            done.add(t)
            expand(target, out, done, stack + [r])


def generate():
    out = [
        "/* simplechain.c — GENERATED FILE, do not edit: scripts/amalgamate.py writes it from the",
        " * source tree (src/, kernels/; see HACKING.md), `make amalgamation` runs it, and",
        " * `make check-amalgamation` (CI) fails when it is stale. Edit those files instead.",
        " *",
        " * simplechain's engine, its portable kernels and its built-in AVX2 and AVX-512 kernel sets in",
        " * one file: with simplechain.h beside it, `cc -std=c11 -O2 app.c simplechain.c -lm -pthread`",
        " * builds a program that picks the fastest set this CPU runs. Sources, in order: " ,
    ]
    for i in range(0, len(MANIFEST), 4):
        out.append(" *   " + ", ".join(MANIFEST[i:i + 4]) + ("," if i + 4 < len(MANIFEST) else "."))
    out += [" */", "#define SC__AMALGAMATION 1"]
    done = set()
    for m in MANIFEST:
        done.add(m)
        expand(os.path.join(ROOT, m), out, done, [])
    return "\n".join(out) + "\n"


def main(argv):
    dest = os.path.join(ROOT, "simplechain.c")
    text = generate()
    if argv[1:2] == ["--check"]:
        try:
            with open(dest, encoding="utf-8") as f:
                same = f.read() == text
        except OSError:
            same = False
        if not same:
            sys.stderr.write("simplechain.c is stale: it is not what scripts/amalgamate.py writes "
                             "from the tree; run `make amalgamation` and commit it\n")
            return 1
        return 0
    if len(argv) > 1:
        dest = argv[1]
    tmp = dest + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, dest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
