#!/usr/bin/env python3
"""Checks the SDK boundary: plugins see sdk/include alone, and libweft.so
exports the SDK alone.

1. Include directories. Each plugin target of the list (plugins/**, and
   examples/plugins/** built in the tree) may have no include directory in
   or above core/ or kernels/, in the source tree or the build tree: a
   plugin compiles against sdk/include (and the build's generated
   sdk/include), its own folder and system headers only. The list holds
   every directory the compiler gets, the ones inherited from linked
   targets included (CMake's $<TARGET_PROPERTY:t,INCLUDE_DIRECTORIES>).
2. Include lines. No source of such a target, nor any header it includes
   with quotes from its own folder, may reach a file of core/ or kernels/
   by a relative path ("../../core/x.h").
3. Exports. `nm -D --defined-only` of the library may show only functions
   that a header under the SDK include directory declares WEFT_API, and
   every function declared WEFT_API must be exported (an SDK user links
   it).

usage: check_sdk_boundary.py --source DIR --binary DIR [--plugins LIST]
                             [--library SO --sdk-include DIR] [--nm NM]
LIST holds one line per plugin target:
"name<TAB>source_dir<TAB>include_dir;...<TAB>source;...".
Exit status: 0 when the boundary holds, 1 when not (each breach printed
with what to do), 2 on bad input.
"""
import argparse
import os
import re
import subprocess
import sys

QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
WEFT_API_DECL = re.compile(r'\bWEFT_API\b[^;{()]*?\b([A-Za-z_]\w*)\s*\(', re.S)
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)


def die(msg):
    print("check_sdk_boundary: " + msg, file=sys.stderr)
    sys.exit(2)


def inside(path, root):
    """Whether path is root or below it."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def forbidden_roots(source, binary):
    roots = []
    for top in (source, binary):
        if top:
            roots += [os.path.join(top, "core"), os.path.join(top, "kernels")]
    return [os.path.realpath(r) for r in roots]


def rel(path, source):
    path = os.path.realpath(path)
    return os.path.relpath(path, source) if inside(path, source) else path


def read_plugins(list_file):
    try:
        lines = open(list_file, encoding="utf-8").read().splitlines()
    except OSError as e:
        die("cannot read the plugin list %s: %s" % (list_file, e.strerror))
    plugins = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 4:
            die("%s:%d: expected 4 tab-separated fields, got %d" % (list_file, n, len(parts)))
        name, src_dir, incs, srcs = parts
        plugins.append((name, src_dir, [i for i in incs.split(";") if i],
                        [s for s in srcs.split(";") if s]))
    return plugins


def check_include_dirs(plugins, source, roots):
    """Breaches of rule 1: (plugin, dir, forbidden root)."""
    out = []
    for name, src_dir, incs, _ in plugins:
        for inc in incs:
            real = os.path.realpath(inc)
            for root in roots:
                # in core/ or kernels/, or above them (then "core/x.h" reaches in)
                if inside(real, root) or inside(root, real):
                    out.append("plugin '%s' (%s) compiles with include directory %s, which "
                               "reaches %s/: a plugin sees sdk/include alone. Move what it "
                               "needs into the SDK (a header-only utility in "
                               "sdk/include/weft, or a host member) and drop the directory "
                               "from its CMakeLists.txt"
                               % (name, rel(src_dir, source), rel(inc, source),
                                  rel(root, source)))
                    break
    return out


def quoted_includes(path):
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError as e:
        die("cannot read %s: %s" % (path, e.strerror))
    for n, line in enumerate(text.splitlines(), 1):
        m = QUOTED_INCLUDE.match(line)
        if m:
            yield n, m.group(1)


def check_include_lines(plugins, source, roots):
    """Breaches of rule 2: a quoted include that resolves into core/ or
    kernels/ relative to the including file."""
    out, seen = [], set()
    for name, src_dir, _, srcs in plugins:
        todo = [os.path.realpath(os.path.join(src_dir, s)) for s in srcs]
        own = [os.path.realpath(src_dir)] + [os.path.dirname(t) for t in todo]
        while todo:
            f = todo.pop()
            if f in seen or not os.path.isfile(f):
                continue
            seen.add(f)
            for n, inc in quoted_includes(f):
                target = os.path.realpath(os.path.join(os.path.dirname(f), inc))
                if not os.path.isfile(target):
                    continue
                bad = [r for r in roots if inside(target, r)]
                if bad:
                    out.append("plugin '%s': %s:%d includes \"%s\", a file of %s/: a plugin "
                               "includes sdk/include and its own headers only; move what it "
                               "needs into the SDK or the plugin"
                               % (name, rel(f, source), n, inc, rel(bad[0], source)))
                elif any(inside(target, o) for o in own):
                    todo.append(target)
    return out


def sdk_api(include_dir):
    """{function: header} for every WEFT_API declaration under include_dir."""
    api = {}
    if not os.path.isdir(include_dir):
        die("the SDK include directory %s does not exist" % include_dir)
    for top, _, files in os.walk(include_dir):
        for f in sorted(files):
            if not f.endswith(".h"):
                continue
            path = os.path.join(top, f)
            text = COMMENT.sub(" ", open(path, encoding="utf-8").read())
            text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))
            for m in WEFT_API_DECL.finditer(text):
                api.setdefault(m.group(1), os.path.relpath(path, include_dir))
    return api


def exported(nm, library):
    try:
        out = subprocess.run([nm, "-D", "--defined-only", library], check=True,
                             capture_output=True, text=True).stdout
    except FileNotFoundError:
        die("cannot run '%s': install binutils (build-essential)" % nm)
    except subprocess.CalledProcessError as e:
        die("%s -D --defined-only %s failed: %s" % (nm, library, e.stderr.strip()))
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            names.add(parts[-1].split("@")[0])
    return names


def check_exports(nm, library, include_dir):
    api = sdk_api(include_dir)
    names = exported(nm, library)
    out = []
    extra = sorted(names - set(api))
    if extra:
        shown = ", ".join(extra[:40]) + (", ..." if len(extra) > 40 else "")
        out.append("%s exports %d symbol%s that no header of %s declares WEFT_API: %s. "
                   "Give %s internal linkage or hidden visibility (the core is compiled "
                   "with -fvisibility=hidden and linked with cmake/libweft.map), or, if "
                   "%s part of the SDK, declare %s WEFT_API in sdk/include/weft"
                   % (os.path.basename(library), len(extra), "" if len(extra) == 1 else "s",
                      include_dir, shown, "it" if len(extra) == 1 else "them",
                      "it is" if len(extra) == 1 else "they are",
                      "it" if len(extra) == 1 else "them"))
    missing = sorted(set(api) - names)
    for f in missing:
        out.append("%s declares %s WEFT_API, but %s does not export it: define it in the "
                   "core (a program linking the SDK would fail to link), or remove the "
                   "declaration" % (api[f], f, os.path.basename(library)))
    return out, len(names), len(api)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--binary", default="")
    ap.add_argument("--plugins")
    ap.add_argument("--library")
    ap.add_argument("--sdk-include")
    ap.add_argument("--nm", default="nm")
    a = ap.parse_args()
    if bool(a.library) != bool(a.sdk_include):
        die("--library and --sdk-include go together")
    if not a.plugins and not a.library:
        die("nothing to check: give --plugins and/or --library with --sdk-include")
    source = os.path.realpath(a.source)
    roots = forbidden_roots(source, os.path.realpath(a.binary) if a.binary else "")
    breaches, said = [], []
    if a.plugins:
        plugins = read_plugins(a.plugins)
        breaches += check_include_dirs(plugins, source, roots)
        breaches += check_include_lines(plugins, source, roots)
        said.append("%d plugin%s include sdk/include alone"
                    % (len(plugins), "" if len(plugins) == 1 else "s"))
    if a.library:
        if not os.path.isfile(a.library):
            die("the library %s does not exist: build it first" % a.library)
        out, n_exp, n_api = check_exports(a.nm, a.library, a.sdk_include)
        breaches += out
        said.append("%s exports the %d WEFT_API functions of the SDK and nothing else"
                    % (os.path.basename(a.library), n_api))
    for b in breaches:
        print("SDK boundary: " + b)
    if breaches:
        print("%d breach%s of the SDK boundary (docs/design.md, \"What a plugin may include "
              "and call\")" % (len(breaches), "" if len(breaches) == 1 else "es"))
        return 1
    print("; ".join(said))
    return 0


if __name__ == "__main__":
    sys.exit(main())
