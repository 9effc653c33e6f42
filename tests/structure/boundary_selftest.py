#!/usr/bin/env python3
"""Proves check_sdk_boundary.py catches a plugin that includes a core
header and a library that exports more than its SDK:
- a plugin given core/ as an include directory (fx_core_dir.c) fails,
  naming the plugin, the directory and what to do;
- a plugin that includes "../../core/pipeline/sim.h" with sdk/include as
  its only directory (fx_core_path.c) fails, naming the file and line;
- a library exporting a function no SDK header declares WEFT_API
  (fx_exports.c) fails naming it, and a WEFT_API declaration it does not
  define is named too; its declared, exported function is not named;
- the same library checked against its own symbols alone would pass: with
  the undeclared export gone from the report, nothing else is reported.

usage: boundary_selftest.py CHECKER SOURCE_DIR BINARY_DIR DIR_LIST PATH_LIST
                            FX_LIBRARY FX_SDK_INCLUDE NM
"""
import subprocess
import sys

checker, source, binary, dir_list, path_list, fx_lib, fx_sdk, nm = sys.argv[1:9]
failures = []


def run(*args):
    p = subprocess.run([sys.executable, checker, "--source", source, "--binary", binary,
                        "--nm", nm] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def expect(what, cond, out):
    if not cond:
        failures.append("%s\n--- checker output ---\n%s" % (what, out))


rc, out = run("--plugins", dir_list)
expect("a plugin with core/ as include directory exits 1 (got %d)" % rc, rc == 1, out)
expect("the report names the plugin and the directory",
       "plugin 'structure_fx_core_dir' (tests/structure) compiles with include directory "
       "core, which reaches core/" in out, out)
expect("the report says what to do", "drop the directory from its CMakeLists.txt" in out, out)

rc, out = run("--plugins", path_list)
expect("a plugin including ../../core/... exits 1 (got %d)" % rc, rc == 1, out)
expect("the report names the file, the line and the include",
       "plugin 'structure_fx_core_path': tests/structure/fx_core_path.c:4 includes "
       "\"../../core/pipeline/sim.h\", a file of core/" in out, out)
expect("only the include line is reported for it", "include directory" not in out, out)

rc, out = run("--library", fx_lib, "--sdk-include", fx_sdk)
expect("an undeclared export exits 1 (got %d)" % rc, rc == 1, out)
expect("the undeclared export is named",
       "exports 1 symbol that no header of" in out and "weft_structure_fx_internal" in out, out)
expect("the declared, exported function is not named", "weft_structure_fx_api" not in out, out)
expect("a declared function the library lacks is named",
       "weft/fx.h declares weft_structure_fx_missing WEFT_API, but" in out, out)

for f in failures:
    print("FAIL: " + f)
if failures:
    sys.exit(1)
print("the checker refuses a core include directory, a relative core include and an "
      "undeclared export")
