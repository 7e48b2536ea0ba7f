"""The docs build as a site without a warning (`mkdocs build --strict`: no broken link or anchor,
no page left out of the nav), and what the README promises about itself holds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_the_site_builds_strict(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about its successor, not about the docs
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    # the home page includes the README's intro rather than a copy of it
    [intro] = re.findall(r"\[start:intro\] -->\n(.*?)\n", README)
    assert intro in (tmp_path / "site" / "index.html").read_text()


def test_the_readme_links_resolve() -> None:
    """GitHub renders the README, not mkdocs, so its links are checked here."""
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    assert targets
    assert [t for t in targets if not t.startswith(("http://", "https://")) and not (ROOT / t).exists()] == []


def test_the_readme_test_command_is_what_ci_runs() -> None:
    [command] = re.findall(r"\| run the tests [^|]*\| `([^`]+)` \|", README)
    ci = (ROOT / ".ci" / "run").read_text()
    assert [line.strip() for line in ci.splitlines() if line.strip() == command] == [command]
