#!/usr/bin/env python3
"""Finds include and call cycles among weft's own files.

The call graph comes from the build's object files: `nm` lists the global
symbols each object defines and the ones it leaves undefined, and an object
that uses a symbol another object of the same product defines depends on
that object's source file. The core subsystems and the CPU kernels are one
product (libweft.so); each plugin and the CUDA kernel library is its own.
The include graph comes from the `#include` lines of the repository's
headers under core/, kernels/, plugins/ and sdk/include/.

A cycle is a strongly connected component of more than one file. Each one
must be listed in the allow-list (one cycle a line: its files, in any
order); a cycle not listed fails, and so does a listed cycle that no longer
exists, so the list only shrinks. A listed cycle with a file this build
does not compile (the CUDA files without CUDA) is not checked.

usage: check_cycles.py --source DIR --objects LIST --allow FILE [--nm NM]
                       [--no-headers]
LIST holds one line per product: "product<TAB>source_dir<TAB>obj;obj;...".
Exit status: 0 when the cycles found are exactly the allowed ones, 1 when
not (each difference printed with the symbols or includes that tie it), 2
on bad input.
"""
import argparse
import os
import re
import subprocess
import sys

# nm -P types that define a symbol for the linker. Weak definitions (W, V)
# are left out: C++ emits one in every object that instantiates an inline
# function, which would tie unrelated files together.
DEFINED = set("TDBRCGSi")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
HEADER_ROOTS = ("core", "kernels", "plugins", "sdk/include")


def die(msg):
    print("check_cycles: " + msg, file=sys.stderr)
    sys.exit(2)


def object_source(obj, source_dir, root):
    """Maps build/.../CMakeFiles/T.dir/a/b.c.o back to the repository file."""
    m = re.search(r"CMakeFiles/[^/]+\.dir/(.*)\.o(bj)?$", obj)
    rel = m.group(1) if m else os.path.basename(obj)
    rel = rel.replace("__/", "../")
    path = os.path.normpath(os.path.join(source_dir, rel))
    return os.path.relpath(path, root)


def read_symbols(nm, obj):
    try:
        out = subprocess.run([nm, "-P", obj], check=True, capture_output=True,
                             text=True).stdout
    except FileNotFoundError:
        die("cannot run '%s': install binutils (build-essential)" % nm)
    except subprocess.CalledProcessError as e:
        die("%s -P %s failed: %s" % (nm, obj, e.stderr.strip()))
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            used.add(name)
        elif kind in DEFINED:
            defined.add(name)
    return defined, used


def call_graph(list_file, root, nm):
    """Returns {file: {file: [symbols]}} over every product's objects."""
    edges = {}
    try:
        lines = open(list_file, encoding="utf-8").read().splitlines()
    except OSError as e:
        die("cannot read the object list %s: %s" % (list_file, e.strerror))
    products = {}  # product: (owner {symbol: files}, uses {file: symbols})
    for line in lines:
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            die("%s: malformed line (want product, source dir, objects): %r"
                % (list_file, line))
        product, source_dir, objs = fields
        owner, uses = products.setdefault(product, ({}, {}))
        for obj in filter(None, objs.split(";")):
            if not os.path.exists(obj):
                die("object %s of %s does not exist: build the tree first"
                    % (obj, product))
            src = object_source(obj, source_dir, root)
            defined, used = read_symbols(nm, obj)
            for s in defined:
                owner.setdefault(s, set()).add(src)
            uses.setdefault(src, set()).update(used)
    for owner, uses in products.values():
        for src, used in uses.items():
            edges.setdefault(src, {})
            for s in used:
                for dst in owner.get(s, ()):
                    if dst != src:
                        edges[src].setdefault(dst, []).append(s)
    return edges


def header_graph(root):
    """Returns {header: {header: ["#include"]}} among the repo's headers."""
    headers = []
    for top in HEADER_ROOTS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if n.endswith((".h", ".cuh")):
                    headers.append(os.path.relpath(os.path.join(dirpath, n), root))
    known = set(headers)
    edges = {}
    for h in headers:
        edges.setdefault(h, {})
        with open(os.path.join(root, h), encoding="utf-8", errors="replace") as f:
            for line in f:
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                name = m.group(2)
                bases = [os.path.dirname(h)] if m.group(1) == '"' else []
                bases += list(HEADER_ROOTS)
                for b in bases:
                    cand = os.path.normpath(os.path.join(b, name))
                    if cand in known:
                        if cand != h:
                            edges[h].setdefault(cand, []).append("#include")
                        break
    return edges


def components(edges):
    """Tarjan's strongly connected components, iteratively; size > 1 only."""
    nodes = set(edges)
    for d in edges.values():
        nodes.update(d)
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


def describe(comp, edges):
    lines = []
    for a in sorted(comp):
        for b in sorted(edges.get(a, {})):
            if b in comp:
                syms = sorted(set(edges[a][b]))
                more = " (+%d more)" % (len(syms) - 6) if len(syms) > 6 else ""
                lines.append("    %s -> %s: %s%s" % (a, b, ", ".join(syms[:6]), more))
    return "\n".join(lines)


def read_allow(path):
    allowed = {}
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        die("cannot read the allow-list %s: %s" % (path, e.strerror))
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        if len(line) < 2:
            die("%s:%d: a cycle needs at least two files" % (path, n))
        allowed[frozenset(line)] = n
    return allowed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--objects", required=True)
    ap.add_argument("--allow", required=True)
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--no-headers", action="store_true")
    a = ap.parse_args()
    root = os.path.realpath(a.source)

    graphs = [("call", call_graph(a.objects, root, a.nm))]
    if not a.no_headers:
        graphs.append(("include", header_graph(root)))
    allowed = read_allow(a.allow)
    found = {}
    for kind, edges in graphs:
        for comp in components(edges):
            found[comp] = (kind, edges)

    bad = 0
    for comp in sorted(found, key=sorted):
        kind, edges = found[comp]
        if comp in allowed:
            continue
        bad += 1
        print("new %s cycle: %s\n%s" % (kind, " ".join(sorted(comp)), describe(comp, edges)))
    built = set()
    for _, edges in graphs:
        built.update(edges)
        for d in edges.values():
            built.update(d)
    for comp, n in sorted(allowed.items(), key=lambda kv: kv[1]):
        if comp not in found and comp <= built:
            bad += 1
            print("%s:%d lists a cycle that no longer exists: %s; delete the line"
                  % (a.allow, n, " ".join(sorted(comp))))
    if bad:
        print("%d difference(s) from %s. A new cycle: move the shared definitions into "
              "the file (or a new one) both sides belong to, so calls go one way."
              % (bad, a.allow))
        return 1
    print("%d known cycle(s), no new one" % len(allowed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
