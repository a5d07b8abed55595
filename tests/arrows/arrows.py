#!/usr/bin/python3
"""arrows.py BUILD: the build keeps the arrows.

Each part below bench/ and each sub-part of bench/ is a library whose
include path shows that part and the parts below it, nothing else (the
top-level meson.build says how: a view of links per part, carried by the
dependencies a part's meson.build names). This test takes each library's
own compile command from BUILD/compile_commands.json and preprocesses with
it a one-line file that includes one part's contract header, for every
part: a part below the library, or the library's own, must be found; a
part above it or beside it must be "not found". A library that gets the
tree's root on its path, or a dependency that runs upward, fails here with
the include named, so the guard cannot rot unseen.

LAYERS is the drawing of docs/architecture.md: each part and the parts
right below it that it names. A new part (a new libgs_*.a in the build)
fails here until it has its row."""
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

from gstest import check, finish, require

LAYERS = {
    "base": [],
    "kernels": ["base"],
    "shm": ["kernels"],
    "proto": ["kernels"],
    "compress": ["kernels"],
    "sync": ["compress"],                     # worker/sync.h, and what it declares
    "worker": ["sync"],
    "allreduce": ["proto", "shm", "sync"],    # the two backends never see each other
    "ps": ["proto", "shm", "sync"],
    "bench/files": ["base"],
    "bench/hosts": ["base"],
    "bench/costmodel": ["bench/files", "bench/hosts", "proto", "worker"],
    "bench": ["bench/hosts", "ps", "worker"],  # bench.h: gs_opts and the modes
    "bench/report": ["bench", "bench/costmodel"],
    "bench/job": ["bench/report", "allreduce"],
    "bench/coll": ["bench/job"],
    "bench/cli": ["bench/coll"],
}
# each part's contract header: what another part includes of it
HEADER = {p: f"{p}/{os.path.basename(p)}.h" for p in LAYERS}
HEADER.update({"sync": "worker/sync.h", "bench": "bench/bench.h"})
# the libraries and their parts; the CUDA module's pieces only where it is built
LIBRARY = {"gs_" + (p.split("/")[-1]): p for p in LAYERS if p != "bench"}
LIBRARY.update({"gs_cuda_kernels": "kernels", "gs_cuda_nccl": "allreduce"})
OPTIONAL = {"gs_cuda_kernels", "gs_cuda_nccl"}


def below(part):
    """the part and every part below it"""
    seen, todo = set(), [part]
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo += LAYERS[p]
    return seen


def commands(build):
    """one C compile command per library: library -> (directory, argv)"""
    out = {}
    for c in json.load(open(os.path.join(build, "compile_commands.json"))):
        m = re.search(r"(?:^|\s)(\S*?)lib(gs_\w+)\.a\.p/", c["command"])
        if m and not m.group(1).startswith("tests/") and c["file"].endswith(".c"):
            out.setdefault(m.group(2), (c["directory"], shlex.split(c["command"])))
    return out


def preprocess(directory, argv, header, tmp):
    """argv with its source replaced by `#include "header"`, preprocessed:
    (exit status, the compiler's first error)"""
    src = os.path.join(tmp, header.replace("/", "_") + ".c")
    with open(src, "w") as f:
        f.write(f'#include "{header}"\n')
    args, skip = [], 0
    for a in argv:
        if skip:
            skip -= 1
        elif a in ("-o", "-MF", "-MQ"):
            skip = 1
        elif a not in ("-c", "-MD"):
            args.append(a)
    args[-1] = src  # meson puts the source last
    r = subprocess.run(args + ["-E", "-o", os.devnull, "-fdiagnostics-color=never"],
                       cwd=directory, capture_output=True, text=True)
    errors = [line for line in r.stderr.splitlines() if "error" in line]
    return r.returncode, errors[0] if errors else r.stderr.strip()


def main():
    build = os.path.abspath(sys.argv[1])
    libs = commands(build)
    require(libs, f"no library's compile command in {build}/compile_commands.json")
    for lib in sorted(libs):
        check(lib in LIBRARY, f"lib{lib}.a is no part of the layers: give it a row in "
              "tests/arrows/arrows.py and docs/architecture.md")
    for lib, part in sorted(LIBRARY.items()):
        check(lib in libs or lib in OPTIONAL, f"the build has no lib{lib}.a for {part}")
    jobs = []
    with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(4) as pool:
        for lib in sorted(set(libs) & set(LIBRARY)):
            part, sees = LIBRARY[lib], below(LIBRARY[lib])
            for other in LAYERS:
                d = os.path.join(tmp, lib, other.replace("/", "_"))
                os.makedirs(d)
                jobs.append((lib, part, other, other in sees,
                             pool.submit(preprocess, *libs[lib], HEADER[other], d)))
        refused = 0
        for lib, part, other, may, job in jobs:
            rc, err = job.result()
            h = HEADER[other]
            if may:
                check(rc == 0, f"{part} (lib{lib}.a) cannot include {h}, a part below it: {err}")
            else:
                refused += rc != 0
                check(rc != 0, f"{part} (lib{lib}.a) includes {h}, a part above or beside it: "
                      "the build lets an upward include through")
                check(rc == 0 or h in err and ("No such file" in err or "not found" in err),
                      f"{part} (lib{lib}.a) including {h} failed, but not as 'not found': {err}")
    print(f"{len(jobs)} includes tried in {len(set(libs) & set(LIBRARY))} libraries, "
          f"{refused} of them refused as upward or sideways")
    finish("arrows")


main()
