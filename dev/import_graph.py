"""srgpu's import graph: its cycles and its upward imports (issue 41's check).

    python dev/import_graph.py            # summary; exit status 1 when there is a cycle or an upward import
    python dev/import_graph.py --edges    # every intra-package import, one a line

Every `import` and `from ... import` inside srgpu/ counts, those inside functions too (a lazy import
still ties two modules together), except those under `if TYPE_CHECKING:` (annotations only).

Layers, low to high; a module may import its own layer and those below, never one above:
  0 the loose modules at srgpu/'s top (errors, model, outputs, ...)
  1 kernels   2 engine   3 images, video   4 batch   5 tools   6 cli   7 srgpu.__main__
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "srgpu"
LAYERS = {"kernels": 1, "engine": 2, "images": 3, "video": 3, "batch": 4, "tools": 5, "cli": 6, "__main__": 7}


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "srgpu":
                    found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "srgpu":
                return
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    found.discard(name)
    return {m for m in found if m in known}


def layer(name: str) -> int:
    parts = name.split(".")
    if len(parts) == 1:
        return 0
    return LAYERS.get(parts[1], 0)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(10000)

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
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

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def main() -> int:
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    if "--edges" in sys.argv:
        for a in sorted(graph):
            for b in sorted(graph[a]):
                print(f"{a} -> {b}")
        return 0
    loose = sorted(n for n, p in known.items() if n.count(".") == 1 and p.parent == ROOT)
    found = cycles(graph)
    upward = [(a, b) for a in sorted(graph) for b in sorted(graph[a]) if layer(b) > layer(a)]
    print(f"{len(known)} modules, {sum(map(len, graph.values()))} imports")
    print(f"loose modules at srgpu/'s top: {len(loose)}: {' '.join(n.split('.')[1] for n in loose)}")
    print(f"cycles: {len(found)}")
    for component in found:
        print("  " + " <-> ".join(component))
    print(f"upward imports: {len(upward)}")
    for a, b in upward:
        print(f"  {a} (layer {layer(a)}) -> {b} (layer {layer(b)})")
    return 1 if found or upward else 0


if __name__ == "__main__":
    sys.exit(main())
