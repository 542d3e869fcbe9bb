"""``python -m loopbreaker.cli``: the same as the ``loopbreaker`` command."""

from loopbreaker.cli.main import main

raise SystemExit(main())
