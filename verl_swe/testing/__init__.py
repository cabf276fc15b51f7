"""Honest fakes for what cannot run here (a served model), and factories for real small parts."""
