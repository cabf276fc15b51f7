"""verl trainer integration: sampler, configs, entry point."""
