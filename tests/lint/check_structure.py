#!/usr/bin/python3
"""The house rules of lstream's tree (README, Architecture:
"The layout"), checked in CI.

  limits    no source file over 700 lines and no function over 80 lines in
            ingest/, state/, train/ (the library and cli/), kernels/ and
            include/; lines that hold only a string literal (help text) do
            not count towards a function's length
  includes  a quoted #include names a header of the file's own folder or of
            a folder below it: include/lstream/ includes only
            include/lstream/, include/base/ only those two, and each folder
            only the public headers of the modules it may use
  arrows    (with --objects) no folder library's object uses a symbol that
            another folder defines unless that folder is below it:
            base <- kernels <- state; base <- ingest; train <- all
  cycles    (with --objects) within a folder, no two files use each other,
            directly or through others

Usage: check_structure.py --root SRC [--nm NM] [--objects FOLDER=OBJ:OBJ:...]...
Prints one line per finding and exits 1 if there is any; with --verbose,
the longest files and functions too.
"""
import argparse
import os
import re
import subprocess
import sys

FILE_MAX = 700
FUNCTION_MAX = 80
FOLDERS = ["include", "kernels", "ingest", "state", "train"]

# The folders each folder may use (its own and include/base/ always).
USES = {
    "base": [],
    "kernels": ["base"],
    "ingest": ["base"],
    "state": ["base", "kernels"],
    "train": ["base", "kernels", "ingest", "state"],
}
# The public headers of each module.
PUBLIC = {
    "base": {"common.h", "error.h"},
    "kernels": {"kernels.h"},
    "ingest": {"ingest.h", "produce.h"},
    "state": {"state.h"},
    "train": {"train.h"},
}


def module_of(rel):
    """The module a file belongs to: base (include/), kernels, ingest, state
    or train (train/cli/ included), from its path relative to the root."""
    top = rel.split("/")[0]
    if top == "include":
        if rel.startswith("include/base/"):
            return "base"
        name = os.path.basename(rel)
        for module, headers in PUBLIC.items():
            if name in headers:
                return module
        return "base"
    return top


def sources(root):
    for folder in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if name.endswith((".c", ".h", ".cu")):
                    path = os.path.join(dirpath, name)
                    yield os.path.relpath(path, root), path


# ---------------------------------------------------------------------------
# Limits

STRING_ONLY = re.compile(r'\s*(L|u8)?"([^"\\]|\\.)*"\s*[,;)]*\s*$')
NAME = re.compile(r"(\w+)\s*\(")


def functions(lines):
    """(name, first line, counted lines) of each function definition: a
    declarator at column 0 whose line (or one of the next few) ends with '{',
    to the closing '}' at column 0."""
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if line and not line[0].isspace() and not line.startswith(("#", "/", "*", "}", "extern")):
            j, head = i, line
            while j < n and not lines[j].rstrip().endswith(("{", ";")) and j - i < 12:
                j += 1
                head += " " + (lines[j] if j < n else "")
            before_paren = head.split("(")[0]
            if j < n and lines[j].rstrip().endswith("{") and "(" in head and "=" not in before_paren:
                k = j + 1
                while k < n and lines[k].rstrip() != "}":
                    k += 1
                body = lines[i : k + 1]
                counted = sum(1 for b in body if not STRING_ONLY.match(b))
                yield NAME.search(head).group(1), i + 1, counted
                i = k + 1
                continue
        i += 1


def check_limits(root, findings, longest):
    for rel, path in sources(root):
        lines = open(path, encoding="utf-8").read().split("\n")
        count = len(lines) - (1 if lines and lines[-1] == "" else 0)
        longest.append((count, rel))
        if count > FILE_MAX:
            findings.append(f"{rel}: {count} lines, over {FILE_MAX}")
        if rel.endswith((".c", ".cu")):
            for name, line, counted in functions(lines):
                longest.append((counted, f"{rel}:{line} {name}()"))
                if counted > FUNCTION_MAX:
                    findings.append(f"{rel}:{line}: {name}() is {counted} lines, over {FUNCTION_MAX}")


# ---------------------------------------------------------------------------
# Includes

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def check_includes(root, findings):
    for rel, path in sources(root):
        module = module_of(rel)
        allowed = {module, "base"} | set(USES[module])
        here = os.path.dirname(rel)
        for name in INCLUDE.findall(open(path, encoding="utf-8").read()):
            local = os.path.normpath(os.path.join(here, name))
            if os.path.exists(os.path.join(root, local)):
                target = local
            elif os.path.exists(os.path.join(root, "include", name)):
                target = os.path.normpath(os.path.join("include", name))
            elif rel.startswith("train/cli/") and os.path.exists(os.path.join(root, "train", name)):
                target = os.path.join("train", name)  # the program uses train/'s internals
            else:
                findings.append(f"{rel}: #include \"{name}\" names no header of the tree")
                continue
            theirs = module_of(target)
            if rel.startswith("include/") and not target.startswith("include/"):
                findings.append(f"{rel}: #include \"{name}\": a header in include/ includes a folder above it")
            elif rel.startswith("include/lstream/") and not target.startswith("include/lstream/"):
                findings.append(f"{rel}: #include \"{name}\": a public header includes an internal one")
            elif theirs not in allowed:
                findings.append(f"{rel}: #include \"{name}\": {module} may not use {theirs}")
            elif theirs != module and not target.startswith("include/"):
                findings.append(f"{rel}: #include \"{name}\": {theirs}'s internal header, outside {theirs}")


# ---------------------------------------------------------------------------
# Objects: arrows and cycles

def symbols(nm, obj):
    out = subprocess.run([nm, "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        if parts[1] == "U":
            used.add(parts[0])
        elif parts[1] in "TDBRVWGSCui":  # global definitions
            defined.add(parts[0])
    return defined, used


def cycle_in(graph):
    """One cycle of a graph {node: set(nodes)}, as a list, or None."""
    state, stack = {}, []

    def visit(v):
        state[v] = 1
        stack.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return stack[stack.index(w) :] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        state[v] = 2
        stack.pop()
        return None

    for v in sorted(graph):
        if v not in state:
            found = visit(v)
            if found:
                return found
    return None


def check_objects(nm, objects, findings):
    owner, files = {}, {}
    for folder, objs in objects.items():
        for obj in objs:
            defined, used = symbols(nm, obj)
            name = os.path.basename(obj)
            files[(folder, name)] = (defined, used)
            for sym in defined:
                owner[sym] = (folder, name)
    for (folder, name), (_, used) in sorted(files.items()):
        allowed = {folder} | set(USES[folder])
        for sym in sorted(used):
            if sym in owner and owner[sym][0] not in allowed:
                findings.append(f"{folder}/{name} uses {sym} of {owner[sym][0]}/: {folder} may not use {owner[sym][0]}")
    for folder in objects:
        graph = {n: set() for (f, n) in files if f == folder}
        for n in graph:
            for sym in files[(folder, n)][1]:
                if sym in owner and owner[sym][0] == folder and owner[sym][1] != n:
                    graph[n].add(owner[sym][1])
        cycle = cycle_in(graph)
        if cycle:
            findings.append(f"{folder}: files use each other: {' -> '.join(cycle)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--objects", action="append", default=[], metavar="FOLDER=OBJ:OBJ:...")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    findings, longest = [], []
    check_limits(args.root, findings, longest)
    check_includes(args.root, findings)
    objects = {}
    for spec in args.objects:
        folder, _, objs = spec.partition("=")
        objects[folder] = [o for o in re.split(r"[:;]", objs) if o]
    if objects:
        check_objects(args.nm, objects, findings)
    if args.verbose:
        for kind, pick in (("files", lambda w: ":" not in w), ("functions", lambda w: ":" in w)):
            top = sorted((c, w) for c, w in longest if pick(w))[::-1][:6]
            print(f"longest {kind}: " + ", ".join(f"{w} {c}" for c, w in top))
    for f in findings:
        print(f)
    files = sum(1 for _ in sources(args.root))
    print(f"check_structure: {files} files, {len(objects)} folder libraries: "
          + ("ok" if not findings else f"{len(findings)} finding(s)"))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
