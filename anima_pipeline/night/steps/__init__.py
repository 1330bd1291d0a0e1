"""One folder per step or step family of the night, one file per role with the same names in
every folder (docs/decisions.md, "Step folders"); a role a step does not have is absent:

- step.py: the orchestration (what the registry calls, which animas) and the step's
  declaration (`DECLARED`, night/steps/declaration.py), which night/registry.py assembles;
- prompt.py: the Claude instructions and the request it builds;
- plan.py: the offline plan, pure functions from the step's inputs to tool calls;
- tools.py: the tools it offers (the whitelist); the tool models stay in tools/schemas.py,
  the one contract the executor applies for every engine and door;
- preview.py: its Dagster metadata (audit-log counts, the table it writes, its Markdown
  preview) as plain functions over a connection, no Dagster import.

Beside the roles, a folder holds what its plan needs, one module per concept (light sleep's
fact extraction and anchors, deep sleep's heuristics per round), and its own input
(light/day_input.py).

What several steps share is beside the folders, named for it: framing.py (the rules every
prompt carries), declaration.py, previews.py, day_changes.py; the prompt-prefix families are
in night/prefix.py and the English/Chinese text rules in text/.
"""
