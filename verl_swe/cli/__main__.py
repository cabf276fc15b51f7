"""`python -m verl_swe.cli`."""

from verl_swe.cli import app

app()
