#!/usr/bin/env python3
"""Import cycles between the library's modules.

Reads every `.rs` file under `src/` (the binary under `src/bin/` excepted: it is a user of the
library, not part of it), strips comments and string literals, and resolves each `crate::`,
`super::` and `self::` path, including the grouped forms `use crate::{a::X, b::{Y, Z}}`, to the
module it names. A file's own module is its path (`src/cfg/chart.rs` is `cfg::chart`, a `mod.rs`
is its folder). Two graphs are built: one over top-level modules (`cfg`, `vocab`, ...) and one
over their direct children (`front::tags`, `cfg::chart`, a `mod.rs` as `front::(mod)`). Each
strongly connected component of more than one module is a cycle and is printed with the files
and lines of its edges. The layer order the README names is checked too: an import from a
lower layer to a higher one is printed as a violation.

Usage: scripts/import_cycles.py [--edges] [SRC_DIR]
  --edges  also print every module's imports
Exit status 1 if any cycle or layer violation is found.
"""
import os
import re
import sys

# The layers of the architecture picture, lowest first. A module may import from its own layer
# or any lower one.
LAYERS = [
    {"base"},
    {"limits", "error"},
    {"vocab", "mask", "automata"},
    {"ir"},
    {"front"},
    {"matcher"},
    {"ops", "cfg"},
    {"template", "request"},
    {"engine"},
    {"gpu"},
    {"lib"},
]


def layer_of(module):
    for i, layer in enumerate(LAYERS):
        if module in layer:
            return i
    return None


def strip_comments_and_strings(text):
    """Blanks comments, string and char literals, keeping line breaks so line numbers hold."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        m = re.match(r'b?r(#*)"', text[i:i + 260])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append("\n" * text.count("\n", i, j))
            i = j + 1
            continue
        if c == "'":
            # A char literal ('a', '\n', '\u{..}') or a lifetime ('a): only blank the literal.
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:i + 12])
            if m:
                i += m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


def strip_test_modules(text):
    """Blanks `#[cfg(test)] mod name { ... }` blocks: tests may use anything in the crate."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", text)
        if not m:
            return text
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        text = text[:m.start()] + "\n" * text.count("\n", m.start(), j) + text[j:]


def module_of(path, src):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] == "mod":
        return rel[:-1], True
    if rel == ["lib"]:
        return ["lib"], True
    return rel, False


def expand_use_tree(tree):
    """`a::{b, c::{d}}` -> [`a::b`, `a::c::d`]."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        return [tree]
    prefix, inner = tree[:brace], tree[brace + 1:tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:k])
            start = k + 1
    parts.append(inner[start:])
    return [p for part in parts if part.strip() for p in expand_use_tree(prefix + part.strip())]


def resolve(path, own, is_mod):
    """An absolute module path (list of names) for a `crate::`/`super::`/`self::` path."""
    segs = [s.strip() for s in path.split("::") if s.strip()]
    if not segs:
        return None
    base = own if is_mod else own[:-1]
    if segs[0] == "crate":
        abs_path, segs = [], segs[1:]
    elif segs[0] == "self":
        abs_path, segs = list(own), segs[1:]
    elif segs[0] == "super":
        abs_path = list(base)
        segs = segs[1:]
        while segs and segs[0] == "super":
            abs_path = abs_path[:-1]
            segs = segs[1:]
    else:
        return None
    return abs_path + [s for s in segs if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", s)]


def references(text, own, is_mod):
    """(line, absolute path) of every crate-relative path in the stripped text. In a `mod.rs`
    (or `lib.rs`) a path may also start with a child module the file declares (`use chart::X`)."""
    found = []
    if is_mod:
        declared = re.findall(r"\bmod\s+(\w+)\s*;", text)
        if declared:
            names = "|".join(declared)
            text = re.sub(r"(?<![A-Za-z0-9_:])(" + names + r")::", r"self::\1::", text)
    for m in re.finditer(r"\b(pub(?:\([^)]*\))?\s+)?use\s+((?:crate|super|self)\b[^;]*);", text):
        line = text.count("\n", 0, m.start()) + 1
        if is_mod and m.group(1) and m.group(2).startswith("self::"):
            continue  # a folder re-exporting its children is its facade, not a dependency
        for p in expand_use_tree(re.sub(r"\s+as\s+\w+", "", m.group(2))):
            r = resolve(p.replace(" ", ""), own, is_mod)
            if r:
                found.append((line, r))
    uses = [(m.start(), m.end()) for m in re.finditer(r"\buse\s+[^;]*;", text)]
    for m in re.finditer(r"(?<![A-Za-z0-9_:])((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)",
                         text):
        if any(a <= m.start() < b for a, b in uses):
            continue
        if text[max(0, m.start() - 4):m.start()] == "in ":  # pub(in crate::x)
            continue
        r = resolve(m.group(1), own, is_mod)
        if r:
            found.append((text.count("\n", 0, m.start()) + 1, r))
    return found


def node(path_list, depth, children):
    """The module at `depth` components. At depth 2 an item of a folder's `mod.rs` (a name that
    is no child module of that folder) is `folder::(mod)`."""
    if depth == 1 or path_list[0] not in children:
        return path_list[0]
    if len(path_list) > 1 and path_list[1] in children[path_list[0]]:
        return path_list[0] + "::" + path_list[1]
    return path_list[0] + "::(mod)"


def sccs(graph):
    """Tarjan's algorithm, iterative."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on:
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
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    show_edges = "--edges" in sys.argv
    src = args[0] if args else "src"
    files = []
    for dirpath, _, names in os.walk(src):
        if os.path.relpath(dirpath, src).split(os.sep)[0] == "bin":
            continue
        files += [os.path.join(dirpath, f) for f in names if f.endswith(".rs")]
    known_dirs = {d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))}
    top_level = known_dirs | {os.path.splitext(x)[0] for x in os.listdir(src)}
    children = {d: {os.path.splitext(x)[0] for x in os.listdir(os.path.join(src, d))}
                for d in known_dirs}
    modules = {}
    for f in sorted(files):
        own, is_mod = module_of(f, src)
        with open(f, encoding="utf-8") as fh:
            text = strip_test_modules(strip_comments_and_strings(fh.read()))
        modules[f] = (own, is_mod, references(text, own, is_mod))

    failed = False
    for depth in (1, 2):
        graph, where = {}, {}
        for f, (own, is_mod, refs) in modules.items():
            a = node(own, depth, children)
            graph.setdefault(a, set())
            for line, target in refs:
                if not target:
                    continue
                if depth == 2 and target[0] != own[0]:
                    continue  # level 2 looks inside one top-level module
                b = node(target, depth, children)
                if a != b and target[0] != "lib" and target[0] in top_level:
                    graph[a].add(b)
                    where.setdefault((a, b), []).append(f"{os.path.relpath(f, src)}:{line}")
        cycles = sccs(graph)
        label = "top-level modules" if depth == 1 else "modules inside one top-level module"
        print(f"{label}: {len(graph)} modules, {sum(map(len, graph.values()))} edges, "
              f"{len(cycles)} cycle(s)")
        for comp in cycles:
            failed = True
            print("  cycle: " + " <-> ".join(comp))
            members = set(comp)
            for (a, b), places in sorted(where.items()):
                if a in members and b in members:
                    print(f"    {a} -> {b}: {', '.join(places[:4])}"
                          + (f" (+{len(places) - 4})" if len(places) > 4 else ""))
        if show_edges:
            for a in sorted(graph):
                if graph[a]:
                    print(f"    {a} -> {', '.join(sorted(graph[a]))}")
        if depth == 1:
            for (a, b), places in sorted(where.items()):
                la, lb = layer_of(a), layer_of(b)
                if la is not None and lb is not None and lb > la:
                    failed = True
                    print(f"  layer violation: {a} (layer {la}) -> {b} (layer {lb}): "
                          + ", ".join(places[:4]))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
