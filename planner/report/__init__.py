"""Rendering: the one recommendation record and its table/JSON/CSV, estimate and validation
tables. Formats; never recomputes.
"""
