"""Shared by the Python checks (tests/python): the Skip exception a check raises when it cannot run."""


class Skip(Exception):
    """Raised by a check that cannot run here (the reason is printed)."""
