"""The nightly sleep cycle as Dagster assets (DESIGN §4)."""
