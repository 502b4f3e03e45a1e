"""The ``stalwart`` (alias ``stw``) command line."""
