"""``python -m xbackend``: the command line."""

from xbackend.cli import main

raise SystemExit(main())
