#!/usr/bin/env python3
"""Checks that the server's parts (the top-level modules of server/src: api, engine, auth, ...)
depend on each other in one direction only, and prints the order they stand in.

A part depends on another when one of its files names it: `crate::engine::...`, or
`super::...` climbing out of the part. A cycle between parts (say, the engine reaching up into
`server.rs` for a helper) means neither can be read, tested or moved without the other; the
check fails and names the files that close it. Inside one part, a `mod.rs` and its children may
use each other: that is how a Rust module holds a type its children implement.

Usage: python3 server/check-layers.py [server/src]
"""

import os
import re
import sys


def modules(root):
    """Module path (tuple of names) -> file, for every .rs file under root."""
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(folder, name)
            parts = tuple(os.path.relpath(path, root)[:-3].split(os.sep))
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            found[parts] = path
    return found


def code_of(path):
    """The file's code without comments and without its `#[cfg(test)] mod tests { ... }` tail."""
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{.*", "", text, flags=re.S)


def targets(mod, path, known):
    """The modules `mod` (in file `path`) names through `crate::` or `super::` paths."""
    code = code_of(path)
    own = list(mod) if os.path.basename(path) in ("mod.rs", "lib.rs", "main.rs") else list(mod[:-1])

    def resolve(names):
        for i in range(len(names), -1, -1):
            if tuple(names[:i]) in known:
                return tuple(names[:i])
        return None

    def base(head):
        if head == "crate":
            return []
        ups = head.count("super")
        return own[: max(0, len(own) - (ups - 1))]

    found = set()
    for m in re.finditer(r"\b(crate|super(?:::super)*)((?:::\w+)+)", code):
        found.add(resolve(base(m.group(1)) + m.group(2).split("::")[1:]))
    for m in re.finditer(r"\b(crate|super(?:::super)*)::\{([^;]*)\}", code):
        for item in re.split(r"[,{}]", m.group(2)):
            item = item.strip().split(" ")[0]
            if item and item != "self":
                found.add(resolve(base(m.group(1)) + item.split("::")))
    found.discard(None)
    found.discard(mod)
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "src")
    known = modules(root)
    # part -> part -> the files that make the dependency
    needs = {}
    for mod, path in known.items():
        if not mod or mod[-1].endswith("tests"):
            continue
        for target in targets(mod, path, known):
            if target and target[0] != mod[0]:
                needs.setdefault(mod[0], {}).setdefault(target[0], set()).add(path)
    parts = sorted({m[0] for m in known if m})
    order, state = [], {}

    def visit(part, trail):
        if state.get(part) == "done":
            return
        if state.get(part) == "open":
            cycle = trail[trail.index(part) :] + [part]
            print("server/src: its parts depend on each other in a cycle: " + " -> ".join(cycle))
            for a, b in zip(cycle, cycle[1:]):
                print(f"  {a} -> {b}: " + ", ".join(sorted(needs[a][b])))
            sys.exit(1)
        state[part] = "open"
        for dep in sorted(needs.get(part, {})):
            visit(dep, trail + [part])
        state[part] = "done"
        order.append(part)

    for part in parts:
        visit(part, [])
    print("server/src parts, each using only those before it: " + ", ".join(order))


if __name__ == "__main__":
    main()
