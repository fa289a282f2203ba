#!/usr/bin/env python3
"""Checks the CUDA backend's PTX for shared::cluster accesses at an address
without a base (kernels/lstm_cuda.h, persist_map).

CUDA 13.5's compiler, given one store through "map_shared_rank(p, q), or p
for a one-block cluster", made the one-block case a st.shared::cluster whose
address was `add.s32 %r, 0, offset`: the literal 0 where the shared array's
symbol belongs, 1 KiB below the intended word on sm_90 (wrong results on an
H100 and an H200; the emulator, compiling for the host, cannot show it).

For every ld/st/atom/red on .shared::cluster whose address is a register,
the register's definition is followed back (the nearest definition above it
in the same function, through add, mov, cvt and the cvta blocks) until it
reaches a base: a mapa result, a cvta of a generic pointer, a shared array's
symbol, or a kernel parameter. An address that reaches only literals
(`add.s32 %r, 0, %s` with %s an offset) fails.

Usage: check_ptx.py FILE.ptx...   (exit 1 on a finding, 2 on bad input)
"""
import re
import sys

ACCESS = re.compile(r"^\s*(?:@!?%p\d+\s+)?(?:ld|st|atom|red)\.shared::cluster\S*\s+(.*);")
DEF = re.compile(r"^\s*(?:@!?%p\d+\s+)?([a-z][\w.:]*)\s+(%\w+)\s*,\s*(.*?);")
ENTRY = re.compile(r"^\s*\.(?:visible\s+)?(?:entry|func)\s")
SYMBOLS = re.compile(r"^\s*\.(?:extern\s+)?\.shared\s.*?\s(\w+)\[")


def operands(text):
    return [o.strip() for o in text.split(",")]


def based(lines, at, reg, symbols, depth=0):
    """Whether register `reg`, as used at line `at`, reaches a base."""
    if depth > 24:
        return True  # too far to follow: not this bug's shape
    for i in range(at - 1, -1, -1):
        line = lines[i]
        if ENTRY.match(line):
            return True  # a parameter register, or defined before the body
        m = DEF.match(line)
        if not m or m.group(2) != reg:
            continue
        op, args = m.group(1), operands(m.group(3))
        if op.startswith(("mapa", "cvta", "ld.param")):
            return True
        if op.startswith("cvt") and args and args[0] == "%tmp":
            return True  # the cvt closing a { cvta ... } block
        if op.startswith("mov"):
            return args[0] in symbols or (
                args[0].startswith("%") and based(lines, i, args[0], symbols, depth + 1))
        if op.startswith(("add", "sub", "mad", "shl", "cvt")):
            regs = [a for a in args if a.startswith("%")]
            if any(a in symbols for a in args):
                return True
            if op.startswith("add") and any(a == "0" for a in args):
                return False  # the literal base
            return any(based(lines, i, r, symbols, depth + 1) for r in regs)
        return True  # another instruction made it: not this bug's shape
    return True


def check(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    symbols = {m.group(1) for m in map(SYMBOLS.match, lines) if m}
    findings, accesses = [], 0
    for n, line in enumerate(lines):
        m = ACCESS.match(line)
        if not m:
            continue
        accesses += 1
        addr = re.search(r"\[(%\w+)", m.group(1))
        if addr and not based(lines, n, addr.group(1), symbols):
            findings.append(f"{path}:{n + 1}: {line.strip()}: its address has no base "
                            "(a literal 0 where a shared array or a mapa result belongs)")
    return findings, accesses


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    findings, accesses = [], 0
    for path in argv[1:]:
        try:
            f, a = check(path)
        except OSError as e:
            print(f"check_ptx: {e}", file=sys.stderr)
            return 2
        findings += f
        accesses += a
    for f in findings:
        print(f)
    print(f"check_ptx: {len(argv) - 1} files, {accesses} shared::cluster accesses, "
          f"{len(findings)} without a base")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
