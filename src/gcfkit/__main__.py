"""``python -m gcfkit``: the ``gcfkit`` command, for environments without its script on PATH."""

from .cli import main

raise SystemExit(main())
