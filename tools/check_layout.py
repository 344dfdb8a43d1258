#!/usr/bin/env python3
"""Checks the source layout the architecture asks for (run by CI):

1. No import cycle between files: within each crate, file A naming an item of
   file B (`use crate::x::Y`, `use super::Y`, `crate::x::f()`) is an edge
   A -> B; a re-export (`pub use b::Y` in a `mod.rs`) is followed to the file
   that defines Y, so importing through a parent's re-export is an edge to
   the defining file, not to the parent. No cycle may exist.
2. No source file over 600 lines, except tests and tables (listed below).

Usage: tools/check_layout.py [ROOT]   (exit 1 with the findings on failure)
"""

import os
import re
import sys

MAX_LINES = 600
# Files allowed to be longer: tests, and tables whose length is their content.
LONG_OK = {
    "core/src/wire/tests.rs",
    "core/src/dns/tests.rs",
    "modules/src/input/format/tests.rs",
}
SKIP_DIRS = {"target", ".git", "fuzz", "node_modules"}


def crates(root):
    """(crate dir, src dir) for every crate with a Cargo.toml and a src/."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        if "Cargo.toml" in filenames and os.path.isdir(os.path.join(dirpath, "src")):
            yield dirpath, os.path.join(dirpath, "src")


def module_files(src):
    """module path (tuple) -> file, for every .rs file under src."""
    modules = {}
    for dirpath, _, filenames in os.walk(src):
        for name in filenames:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            if rel and rel[0] == "bin":
                continue
            modules[tuple(rel)] = path
    return modules


def strip_comments(text):
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def test_module_removed(text):
    """Drops `#[cfg(test)] mod tests { ... }` bodies: tests may import anything."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def use_trees(text):
    """Every `use ...;` path, flattened: [(is_pub, [segments])]."""
    found = []
    for m in re.finditer(r"(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", text):
        is_pub = bool(m.group(1))
        tree = re.sub(r"\s+as\s+\w+", "", m.group(2))
        for path in expand(re.sub(r"\s+", "", tree)):
            found.append((is_pub, path))
    return found


def expand(tree):
    """`a::{b, c::{d, e}}` -> [[a, b], [a, c, d], [a, c, e]]."""
    brace = tree.find("{")
    if brace < 0:
        return [[s for s in tree.split("::") if s]]
    prefix = [s for s in tree[:brace].split("::") if s]
    inner, depth, parts, start = tree[brace + 1 : tree.rfind("}")], 0, [], 0
    for i, c in enumerate(inner):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return [prefix + sub for part in parts if part for sub in expand(part)]


def absolute(module, segments):
    """A path as seen from `module`, made absolute within the crate; None if external."""
    if not segments:
        return None
    if segments[0] == "crate":
        return tuple(segments[1:])
    if segments[0] == "self":
        return tuple(module) + tuple(segments[1:])
    if segments[0] == "super":
        base = list(module)
        while segments and segments[0] == "super":
            base = base[:-1]
            segments = segments[1:]
        return tuple(base) + tuple(segments)
    return None


def resolve(path, modules, exports, seen=None):
    """The file defining `path` (longest module prefix, then re-exports)."""
    seen = seen or set()
    for cut in range(len(path), -1, -1):
        prefix = path[:cut]
        if prefix in modules:
            rest = path[cut:]
            if rest and (prefix, rest[0]) in exports and (prefix, rest[0]) not in seen:
                seen.add((prefix, rest[0]))
                target = exports[(prefix, rest[0])] + rest[1:]
                return resolve(target, modules, exports, seen)
            return prefix
    return None


def check_crate(crate_dir, src, root):
    modules = module_files(src)
    texts = {m: test_module_removed(strip_comments(open(f).read())) for m, f in modules.items()}
    # (module, name) -> absolute path it re-exports.
    exports = {}
    for module, text in texts.items():
        for is_pub, segments in use_trees(text):
            path = absolute(module, segments)
            if is_pub and path and segments[-1] not in ("*", "self"):
                exports[(module, path[-1])] = path
    edges = {m: set() for m in modules}
    for module, text in texts.items():
        paths = [absolute(module, s) for _, s in use_trees(text)]
        paths += [
            absolute(module, m.group(0).split("::"))
            for m in re.finditer(r"\b(?:crate|super)(?:::\w+)+", text)
        ]
        for path in filter(None, paths):
            target = resolve(path, modules, exports)
            if target is not None and target != module:
                edges[module].add(target)
    problems = []
    for cycle in cycles(edges):
        names = [os.path.relpath(modules[m], root) for m in cycle]
        problems.append("import cycle: " + " -> ".join(names + names[:1]))
    return problems


def cycles(edges):
    """The strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def long_files(root):
    """Files over MAX_LINES lines, not counting their `#[cfg(test)]` modules."""
    problems = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and d not in ("tests", "benches")]
        for name in sorted(filenames):
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if rel in LONG_OK:
                continue
            lines = test_module_removed(open(path).read()).count("\n")
            if lines > MAX_LINES:
                problems.append(f"{rel}: {lines} lines without its tests (more than {MAX_LINES}: split it by job)")
    return problems


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    problems = []
    for crate_dir, src in sorted(set(crates(root))):
        problems += check_crate(crate_dir, src, root)
    problems += long_files(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check_layout: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("check_layout: no import cycles between files, no file over 600 lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
