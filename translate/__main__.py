"""`python -m translate [options]` = `python -m basecrawler translate [options]`."""
import sys

from basecrawler.cli import main

raise SystemExit(main(["translate", *sys.argv[1:]]))
