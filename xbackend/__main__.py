"""``python -m xbackend``: the command line.

Ctrl-C while the command line itself is imported is one line and exit 130, as it is
everywhere after (``xbackend.cli.main``), not a traceback: ``python -m`` imports the
package (``xbackend/__init__.py``, NumPy and the backends) before this file runs, so the
package installs the handler for those imports itself, when started as the command line;
``main`` takes Ctrl-C over from it.
"""

import sys

try:
    from xbackend.cli import main
except KeyboardInterrupt:
    print("\nxbackend: interrupted: nothing was recorded yet", file=sys.stderr)
    raise SystemExit(130) from None

raise SystemExit(main())
