"""``python -m stalwart``: the ``stalwart`` command."""

from stalwart.cli.main import main

main()
