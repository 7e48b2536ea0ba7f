"""The `pyfsm` command line's commands, grouped by what they work on (see pyfsm/cli.py)."""
