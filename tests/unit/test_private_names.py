"""No module of pyfsm/ uses another module's private name: no ``from pyfsm... import _name``
(relative or absolute) and no ``module._name`` on a module of pyfsm. A name two modules share
is public in the one that owns it (``definition.DEFINITION_SOURCE``, ``runner.ClaimedRun``).

Dunder names (``__version__``) are not private; a module's own private names are its own."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def module_names(package: Path) -> dict[Path, tuple[str, bool]]:
    """Each file of the package: (its dotted name, whether it is a package's __init__)."""
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        init = parts[-1] == "__init__"
        names[path] = (".".join(parts[:-1] if init else parts), init)
    return names


def absolute(module: str, init: bool, level: int, target: str | None) -> str:
    """The module a ``from ... import`` in ``module`` imports from."""
    if level == 0:
        return target or ""
    base = module.split(".")
    base = base[: len(base) - (level - 1 if init else level)]
    return ".".join(base + ([target] if target else []))


def violations(package: Path) -> list[str]:
    files = module_names(package)
    modules = {name for name, _ in files.values()}
    top = package.name
    found = []
    for path, (module, init) in files.items():
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(package.parent)
        bound: dict[str, str] = {}  # a local name -> the module of the package it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == top:
                        if alias.asname:
                            bound[alias.asname] = alias.name
                        else:
                            bound[top] = top
            elif isinstance(node, ast.ImportFrom):
                source = absolute(module, init, node.level, node.module)
                if source != top and not source.startswith(top + "."):
                    continue
                for alias in node.names:
                    if f"{source}.{alias.name}" in modules:
                        bound[alias.asname or alias.name] = f"{source}.{alias.name}"
                    elif is_private(alias.name) and source != module:
                        found.append(f"{where}:{node.lineno}: from {source} import {alias.name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and is_private(node.attr):
                owner = module_of(node.value, bound, modules)
                if owner is not None and owner != module:
                    found.append(f"{where}:{node.lineno}: {ast.unparse(node)} ({owner}.{node.attr})")
    return found


def module_of(value: ast.expr, bound: dict[str, str], modules: set[str]) -> str | None:
    """The module of the package ``value`` names (``db``, ``pyfsm.db.pool``), or None."""
    if isinstance(value, ast.Name):
        return bound.get(value.id)
    if isinstance(value, ast.Attribute):
        owner = module_of(value.value, bound, modules)
        if owner is not None and f"{owner}.{value.attr}" in modules:
            return f"{owner}.{value.attr}"
    return None


def test_no_module_uses_another_modules_private_name() -> None:
    assert violations(ROOT / "pyfsm") == []


def test_the_check_finds_each_form(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from .sub.own import Public, __version__\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "own.py").write_text("_hidden = 1\n__version__ = '1'\nPublic = _hidden\n")
    (package / "sub" / "user.py").write_text(
        "import pkg.sub.own\n"
        "import pkg.sub.own as alias\n"
        "from . import own\n"
        "from .own import Public, _hidden\n"
        "from pkg.sub.own import _hidden as again\n"
        "def late():\n"
        "    from .. import sub\n"
        "    return own._hidden, alias._hidden, pkg.sub.own._hidden, sub.own._hidden, own.Public, own.__doc__\n"
    )
    assert violations(package) == [
        "pkg/sub/user.py:4: from pkg.sub.own import _hidden",
        "pkg/sub/user.py:5: from pkg.sub.own import _hidden",
        "pkg/sub/user.py:8: own._hidden (pkg.sub.own._hidden)",
        "pkg/sub/user.py:8: alias._hidden (pkg.sub.own._hidden)",
        "pkg/sub/user.py:8: pkg.sub.own._hidden (pkg.sub.own._hidden)",
        "pkg/sub/user.py:8: sub.own._hidden (pkg.sub.own._hidden)",
    ]
