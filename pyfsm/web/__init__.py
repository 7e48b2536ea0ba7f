"""The web console (`pyfsm web`): machine types, instances, history, failures, the queue,
locks and the relay's outbox in a browser, with optional actions. Needs ``pyfsm-mysql[web]``."""

from .app import ConsoleConfig, create_app

__all__ = ["ConsoleConfig", "create_app"]
