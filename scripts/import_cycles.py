#!/usr/bin/env python3
"""Find import circles in a package: `python3 scripts/import_cycles.py pyfsm`.

Parses every module of the package with ast (nothing is imported, no dependency beyond the
standard library), builds the graph of which module imports which, and prints each circle,
a strongly connected component of that graph, with the import statements that close it, then
``N import circles``. Exits 1 if there is one, 2 if a file cannot be read or parsed.

What counts as an import of module M by module A:

* ``import pkg.m`` and ``from pkg import m`` (m a module), absolute or relative, anywhere in A:
  at the top, in a function (a late import is still a circle, it only fails later), in a
  ``try``; but not in ``if TYPE_CHECKING:`` (read by type checkers only; its ``else`` counts);
* ``from pkg.m import name`` imports pkg.m; ``from pkg import name`` (name not a module)
  imports pkg, its ``__init__``;
* the packages above M that Python initialises on the way (``pkg`` for ``import pkg.m``) are
  not counted: they are started before any of their modules, so they close no circle of their
  own, and counting them would make every ``__init__`` that imports its modules a circle;
* imports by name at run time (``importlib.import_module``, ``__import__``) are not seen.

`make lint` runs it on pyfsm/ (docs/architecture.md says what keeps the graph free of circles).
"""

from __future__ import annotations

import argparse
import ast
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

#: module -> {imported module: [where, ...]}: one entry per import statement ("pkg/a.py:12")
Graph = dict[str, dict[str, list[str]]]


def modules_of(package: Path) -> dict[str, Path]:
    """Each module of the package by its dotted name (a package by its own name)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if not all(part.isidentifier() for part in parts):
            continue  # not importable (a script with a dash, a folder that is no package name)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING`` (any module's)."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of the tree that can run, in order: not those under ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        if isinstance(node, ast.If) and is_type_checking(node.test):
            children: list[ast.AST] = list(node.orelse)
        else:
            children = list(ast.iter_child_nodes(node))
        stack.extend(reversed(children))


def base_of(module: str, is_package: bool, level: int) -> str | None:
    """The package a relative import of ``level`` dots starts from, None above the top."""
    parts = module.split(".")
    keep = len(parts) - (level - 1 if is_package else level)
    return ".".join(parts[:keep]) if keep > 0 else None


def imported(module: str, path: Path, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> list[str]:
    """The modules of the package that one import statement of ``module`` imports."""

    def known(name: str) -> str | None:  # the module itself, else the closest package above it that is known
        parts = name.split(".")
        while parts:
            if ".".join(parts) in modules:
                return ".".join(parts)
            parts.pop()
        return None

    targets: list[str | None] = []
    if isinstance(node, ast.Import):
        targets = [known(alias.name) for alias in node.names]
    else:
        if node.level:
            base = base_of(module, path.name == "__init__.py", node.level)
            if base is None:
                return []
            source = f"{base}.{node.module}" if node.module else base
        else:
            source = node.module or ""
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            targets.append(submodule if submodule in modules else known(source))
    return sorted({target for target in targets if target is not None and target != module})


def build_graph(package: Path) -> Graph:
    modules = modules_of(package)
    graph: Graph = {module: {} for module in modules}
    for module, path in modules.items():
        where = path.relative_to(package.parent).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in runtime_imports(tree):
            for target in imported(module, path, node, modules):
                graph[module].setdefault(target, []).append(f"{where}:{node.lineno}")
    return graph


def components(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def shortest_circle(graph: Graph, component: list[str]) -> list[str]:
    """A shortest circle through the component's first module, staying inside the component."""
    start, members = component[0], set(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for successor in sorted(graph[node]):
                if successor not in members:
                    continue
                if successor == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if successor not in came_from:
                    came_from[successor] = node
                    following.append(successor)
        frontier = following
    raise AssertionError(f"no circle through {start}")  # a component of two or more always has one


def report(graph: Graph, component: list[str], number: int) -> Iterator[str]:
    """The circle's modules, then one shortest way around it with the imports that make it."""
    yield f"circle {number}: {len(component)} modules: {', '.join(component)}"
    circle = shortest_circle(graph, component)
    for source, target in itertools.pairwise(circle):
        yield f"  {source} -> {target}  ({', '.join(graph[source][target])})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("packages", nargs="+", type=Path, help="a package's folder (its __init__.py's folder)")
    args = parser.parse_args(argv)
    found: list[tuple[Graph, list[str]]] = []
    for package in args.packages:
        if not (package / "__init__.py").is_file():
            print(f"import_cycles: {package}: not a package (no __init__.py)", file=sys.stderr)
            return 2
        try:
            graph = build_graph(package.resolve())
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
            print(f"import_cycles: {exc}", file=sys.stderr)
            return 2
        found += [(graph, component) for component in components(graph)]
        edges = sum(len(targets) for targets in graph.values())
        print(f"{package.name}: {len(graph)} modules, {edges} imports between them")
    for number, (graph, component) in enumerate(found, 1):
        for line in report(graph, component, number):
            print(line)
    print(f"{len(found)} import circles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
