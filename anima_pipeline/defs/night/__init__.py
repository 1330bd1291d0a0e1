"""The nightly sleep cycle as Dagster assets; the step order is the registry in night/registry.py."""
