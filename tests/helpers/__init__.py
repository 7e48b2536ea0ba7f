"""What the tests share: imported as ``helpers.<module>`` (pyproject's pytest ``pythonpath``
puts tests/ on sys.path, and processes the tests spawn inherit it), never from a test module.

Fixtures live in conftest.py files: tests/conftest.py (the server, databases, stores) and a
folder's own; a helper module may define a fixture that the tests using it import by name.
"""
