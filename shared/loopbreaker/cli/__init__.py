"""The ``loopbreaker`` command line: :mod:`.main` parses, one module per subcommand."""
