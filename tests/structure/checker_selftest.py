#!/usr/bin/env python3
"""Proves check_cycles.py catches a cycle: two objects built for the purpose
(cycle_a.c and cycle_b.c call each other) must fail against an empty
allow-list, naming both files and the symbols that tie them; pass when the
allow-list names that cycle; fail when the allow-list names a cycle that
does not exist (cycle_c.c calls cycle_a.c one way only); and skip a listed
cycle with a file the build did not compile.

usage: checker_selftest.py CHECKER SOURCE_DIR OBJECT_LIST NM
"""
import os
import subprocess
import sys
import tempfile

checker, source, objects, nm = sys.argv[1:5]
failures = []


def run(allow_text):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(allow_text)
    try:
        p = subprocess.run([sys.executable, checker, "--source", source, "--objects", objects,
                            "--allow", f.name, "--nm", nm, "--no-headers"],
                           capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    return p.returncode, p.stdout + p.stderr


def expect(what, cond, out):
    if not cond:
        failures.append("%s\n--- checker output ---\n%s" % (what, out))


rc, out = run("# nothing allowed\n")
expect("an unlisted cycle exits 1 (got %d)" % rc, rc == 1, out)
expect("the report names the cycle's files",
       "new call cycle: cycle_a.c cycle_b.c" in out, out)
expect("the report names the symbol each side uses",
       "cycle_a.c -> cycle_b.c: structure_cycle_b_half" in out and
       "cycle_b.c -> cycle_a.c: structure_cycle_a_half" in out, out)

rc, out = run("cycle_b.c cycle_a.c\n")
expect("a listed cycle passes (got %d)" % rc, rc == 0, out)

rc, out = run("cycle_b.c cycle_a.c\ncycle_a.c cycle_c.c\n")
expect("a listed cycle that no longer exists exits 1 (got %d)" % rc, rc == 1, out)
expect("the stale line is named", ":2 lists a cycle that no longer exists" in out, out)

rc, out = run("cycle_b.c cycle_a.c\ncycle_a.c not_built.c\n")
expect("a listed cycle with a file this build lacks is not checked (got %d)" % rc,
       rc == 0, out)

for f in failures:
    print("FAIL: " + f)
if failures:
    sys.exit(1)
print("the checker reports a new cycle, accepts a listed one, and refuses a stale entry")
