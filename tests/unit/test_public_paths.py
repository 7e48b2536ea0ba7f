"""The import paths the docs name keep working after pyfsm/ was grouped into packages, and
``import pyfsm`` loads no optional dependency (Kafka, Prometheus, the web console's)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

#: (module, attribute) pairs written in README.md, docs/ and the CHANGELOG's list of kept paths.
DOCUMENTED = [
    ("pyfsm", "Store"),
    ("pyfsm", "Relay"),
    ("pyfsm", "Lag"),
    ("pyfsm", "retry"),
    ("pyfsm", "Process"),
    ("pyfsm", "Worker"),
    ("pyfsm", "LockHeld"),
    ("pyfsm", "RunResult"),
    ("pyfsm.aio", "AsyncStore"),
    ("pyfsm.errors", "FsmError"),
    ("pyfsm.metrics", "MetricsServer"),
    ("pyfsm.metrics", "WorkerMetrics"),
    ("pyfsm.metrics", "database_registry"),
    ("pyfsm.metrics", "exposition"),
    ("pyfsm.web", "create_app"),
    ("pyfsm.web", "ConsoleConfig"),
    ("pyfsm.relay", "lag"),
    ("pyfsm.relay", "Relay"),
    ("pyfsm.schema", "DEPRECATED"),
    ("pyfsm.resources", "RESERVED_MACHINE_NAMES"),
    ("pyfsm.resources", "RESERVED_FOR_NEW_TYPES"),
    ("pyfsm.definition_file", "load_machines"),
    ("pyfsm.demo", "ORDER"),
    ("pyfsm.models", "TypeStats"),
    ("pyfsm.limits", "KEY_CHARS"),
    ("pyfsm.schema.routines", "SEND"),
]


@pytest.mark.parametrize(("module", "name"), DOCUMENTED)
def test_a_documented_path_imports(module: str, name: str) -> None:
    assert getattr(importlib.import_module(module), name) is not None


def test_import_pyfsm_loads_no_optional_dependency() -> None:
    code = (
        "import sys, pyfsm; pyfsm.Store; "
        "print(sorted(m for m in ('confluent_kafka', 'prometheus_client', 'starlette', 'jinja2') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout
    lazy = subprocess.run(
        [sys.executable, "-c", "import sys, pyfsm; pyfsm.Relay; print('confluent_kafka' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert lazy.stdout.strip() == "True"  # loaded on first use


def test_an_unknown_name_is_an_attribute_error() -> None:
    import pyfsm

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        pyfsm.Nope  # noqa: B018
