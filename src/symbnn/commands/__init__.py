"""Sub-commands of the `symbnn` CLI: one module each, each defining ``register(subparsers)``
that adds its parser and sets ``handler`` (a function of the parsed args returning an exit code)."""
