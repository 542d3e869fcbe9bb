"""``python -m loopbreaker.signals.catalog [FILE.toml ...]``: check catalog files."""

from loopbreaker.signals.catalog import main

raise SystemExit(main())
