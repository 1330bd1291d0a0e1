"""What cleanup's Dagster materialization shows: the conversations it deleted (counted from
the audit log). No Markdown preview: a deleted conversation has nothing left to name."""

from __future__ import annotations

from anima_pipeline.night.steps.declaration import changes

CHANGES = changes("conversation", conversations_deleted="delete")
