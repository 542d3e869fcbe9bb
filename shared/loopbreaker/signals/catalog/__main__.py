"""``python -m loopbreaker.signals.catalog [FILE.toml ...]``: check catalog files;
``--markdown`` prints docs/signals.md."""

import sys

from loopbreaker.signals.catalog import load, main
from loopbreaker.signals.catalog.docs import markdown

if sys.argv[1:] == ["--markdown"]:
    sys.stdout.write(markdown(load()))
    raise SystemExit(0)
raise SystemExit(main())
