"""scripts/import_cycles.py: pyfsm/ has no import circle, and the checker finds one when there is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "import_cycles.py"


def check(*packages: Path) -> subprocess.CompletedProcess[str]:
    # -I -S: no site-packages, no environment; the checker needs the standard library only
    return subprocess.run(
        [sys.executable, "-I", "-S", str(SCRIPT), *map(str, packages)], capture_output=True, text=True, timeout=120
    )


def test_pyfsm_has_no_import_circle() -> None:
    result = check(ROOT / "pyfsm")
    assert result.returncode == 0, result.stdout + result.stderr
    summary, last = result.stdout.splitlines()
    assert last == "0 import circles"
    modules = int(summary.split(": ")[1].split()[0])
    assert modules == len(list((ROOT / "pyfsm").rglob("*.py"))), summary


def write(package: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)


def test_it_finds_each_circle_and_fails(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    write(
        package,
        {
            "__init__.py": "from .a import A\n",
            "a.py": "from . import b\nA = 1\n",
            "b.py": "def late():\n    from .c import C\n    return C\n",  # an import in a function counts
            "c.py": "from pkg.a import A\nC = A\n",
            "sub/__init__.py": "from .x import X\n",
            "sub/x.py": "import json\nimport pkg.sub\nX = 1\n",  # the package's __init__ imports x: a circle of two
            # only under TYPE_CHECKING: no circle
            "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .e import E\nelse:\n    E = None\n",
            "e.py": "from .d import E as D\nE = D\n",
            "f.py": "from .a import A\nfrom .sub import X\nimport pkg.d\n",  # imports from circles, in none
        },
    )
    result = check(package)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "pkg: 9 modules, 10 imports between them",
        "circle 1: 3 modules: pkg.a, pkg.b, pkg.c",
        "  pkg.a -> pkg.b  (pkg/a.py:1)",
        "  pkg.b -> pkg.c  (pkg/b.py:2)",
        "  pkg.c -> pkg.a  (pkg/c.py:1)",
        "circle 2: 2 modules: pkg.sub, pkg.sub.x",
        "  pkg.sub -> pkg.sub.x  (pkg/sub/__init__.py:1)",
        "  pkg.sub.x -> pkg.sub  (pkg/sub/x.py:2)",
        "2 import circles",
    ]
    # the same package with the TYPE_CHECKING import at run time: d and e make a third circle
    (package / "d.py").write_text("from .e import E\n")
    assert check(package).stdout.splitlines()[-1] == "3 import circles"


def test_a_folder_that_is_no_package_is_an_error(tmp_path: Path) -> None:
    result = check(tmp_path)
    assert result.returncode == 2 and "not a package" in result.stderr
    (tmp_path / "__init__.py").write_text("import (\n")
    assert check(tmp_path).returncode == 2
