"""A diagram as SVG, drawn by Graphviz's dot (pyfsm.diagram.render_file) for the console."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..diagram import render_file


def render_svg(dot_source: str) -> bytes:
    """``dot_source`` drawn as SVG; GraphvizUnavailable when dot is missing or fails.

    Served as an image (``<img src>``), which a browser never lets run script; the names in it
    are machine, state and event names, which pyfsm limits to [a-z0-9_] anyway.
    """
    with tempfile.TemporaryDirectory(prefix="pyfsm-web-") as folder:
        output = Path(folder) / "diagram.svg"
        render_file(dot_source, output)
        return output.read_bytes()
