"""``python -m sgam.cli``: the ``sgam`` command."""

from sgam.cli import app

app()
