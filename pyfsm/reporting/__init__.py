"""Reporting for analysts and operators: reads through the reporting views (``reads``) and
the machine's drawings in Mermaid and Graphviz (``diagram``)."""
