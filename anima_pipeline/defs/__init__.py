"""Dagster definitions, loaded by anima_pipeline.definitions with dg.load_from_defs_folder.

One domain folder, night/: the nightly cycle as one partitioned multi-asset, its checks,
resources, partitions and schedule. instance.py chooses Dagster's own storage.
"""
