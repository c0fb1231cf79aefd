"""CLI sub-commands, one module each with register(subparsers); argument types they share."""
from __future__ import annotations

import argparse
import datetime as dt


def iso_date(text: str) -> dt.date:
    """argparse type for YYYY-MM-DD (a bad value is a usage error, exit 2)."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None
