"""verl-swe: a verl plugin for training long-context, multi-turn software-engineering agents."""

__version__ = "0.1.0"
