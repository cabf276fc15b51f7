"""Tasks from any repository's history: candidates, their environments and tests, kept rows (`verl-swe mine`)."""
