"""CLI sub-commands, one module each with register(subparsers)."""
