#!/usr/bin/env python3
"""git_revision.py: the revision mark that bench carries (bench --version,
the console header, report.json's environment.git_revision, the calibration
file, the peers' and the GPU bundle's logs), so that a figure says which
tree it came from, a tree with uncommitted changes included.

Usage: git_revision.py [DIR]   (DIR: a folder of the work tree; default .)

It prints one line, by this rule:
  <commit>                  the work tree is HEAD's commit exactly: HEAD's
                            hash, 12 hex digits (git rev-parse --short=12)
  <commit>+dirty:<hash>     it is not: <hash> is the first 8 hex digits of
                            the SHA-256 of the difference, which is
                              the output of `git diff HEAD --binary` (every
                              tracked file's change, staged or not, with
                              fixed options: no renames, no external diff,
                              no text conversion, myers, a/ b/ prefixes),
                            then, for each untracked file that git does not
                            ignore (git ls-files --others --exclude-standard),
                            in byte order of their paths: the path, a NUL,
                            the size in decimal, a NUL, the contents
                            (a link: its target)
  unknown                   not a git work tree, or no git
The same tree prints the same mark wherever it is checked out; any change
to a tracked file's contents or mode, or to an untracked file, changes the
hash. meson's vcs_tag runs this at every build (bench/meson.build), so the
mark describes the tree the binary was built from."""
import hashlib
import os
import subprocess
import sys

DIFF = ["diff", "HEAD", "--binary", "--no-renames", "--no-ext-diff", "--no-textconv",
        "--no-color", "--diff-algorithm=myers", "--src-prefix=a/", "--dst-prefix=b/"]


def git(where, args):
    """git's stdout (bytes), or None when git fails or is not there"""
    try:
        r = subprocess.run(["git", "-C", where] + args, capture_output=True)
    except OSError:
        return None
    return r.stdout if r.returncode == 0 else None


def untracked(where, top, h):
    """hash the untracked files that git does not ignore; how many (None: git failed)"""
    listing = git(where, ["ls-files", "-z", "--others", "--exclude-standard", "--full-name",
                          ":/"])
    if listing is None:
        return None
    paths = sorted(p for p in listing.split(b"\0") if p)
    for path in paths:
        full = os.path.join(top, os.fsdecode(path))
        if os.path.islink(full):
            data = os.fsencode(os.readlink(full))
        else:
            try:
                with open(full, "rb") as f:
                    data = f.read()
            except OSError:  # gone meanwhile, or unreadable: its name still counts
                data = b""
        h.update(path + b"\0" + str(len(data)).encode() + b"\0" + data)
    return len(paths)


def mark(where):
    commit = git(where, ["rev-parse", "--short=12", "HEAD"])
    top = git(where, ["rev-parse", "--show-toplevel"])
    if not commit or not top:
        return "unknown"
    commit = commit.decode().strip()
    top = os.fsdecode(top.strip())
    diff = git(where, DIFF)
    if diff is None:
        return "unknown"
    h = hashlib.sha256(diff)
    others = untracked(where, top, h)
    if others is None:
        return "unknown"
    if not diff and not others:
        return commit
    return "%s+dirty:%s" % (commit, h.hexdigest()[:8])


if __name__ == "__main__":
    print(mark(sys.argv[1] if len(sys.argv) > 1 else "."))
