"""The house keeps its shape: no import cycle in the Python package or the engine crate (lazy
imports inside functions count: they only hide a cycle), and no module grows past ~600 lines
without saying why at its top."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "tilemark"
ENGINE = ROOT / "crates" / "engine" / "src"
MAX_LINES = 600
# A module longer than MAX_LINES states its reason in its docstring with this phrase.
LONG_REASON = "Longer than 600 lines because"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def python_graph() -> dict[str, set[str]]:
    """module -> modules it imports (every import statement, wherever it is)."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names
                ]
            for t in targets:
                if t in files and t != module:
                    graph[module].add(t)
    return graph


def rust_graph() -> dict[str, set[str]]:
    """engine source file (as a module path) -> the crate modules it uses."""
    files: dict[str, Path] = {}
    for p in ENGINE.rglob("*.rs"):
        rel = p.relative_to(ENGINE).with_suffix("")
        parts = [x for x in rel.parts if x not in ("mod", "lib")]
        files["::".join(parts) or "crate"] = p
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        text = re.sub(r"//[^\n]*", "", path.read_text())
        text = re.sub(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{.*", "", text, flags=re.S)
        for use in re.findall(r"crate::([a-z_][a-z0-9_:]*)", text):
            parts = use.split("::")
            # The longest prefix that is a file module.
            for n in range(len(parts), 0, -1):
                candidate = "::".join(parts[:n])
                if candidate in files:
                    if candidate != module and not candidate.startswith(module + "::"):
                        graph[module].add(candidate)
                    break
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _describe(found: Iterable[list[str]], graph: dict[str, set[str]]) -> str:
    lines = []
    for comp in found:
        members = set(comp)
        edges = [f"{a} -> {b}" for a in comp for b in sorted(graph[a] & members)]
        lines.append(f"cycle of {len(comp)}: " + "; ".join(edges))
    return "\n".join(lines)


def test_python_package_has_no_import_cycle():
    graph = python_graph()
    found = cycles(graph)
    assert not found, _describe(found, graph)


def test_engine_crate_has_no_module_cycle():
    graph = rust_graph()
    found = cycles(graph)
    assert not found, _describe(found, graph)


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_long_modules_say_why():
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text().count("\n")
        if lines > MAX_LINES:
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            if LONG_REASON not in doc:
                too_long.append(f"{path.relative_to(ROOT)} ({lines} lines)")
    assert not too_long, "modules over 600 lines without a reason at their top: " + ", ".join(
        too_long
    )
