"""The `anima` command line, one module per command group:

- `store`: db migrate / stop, import, status
- `embed`: embed (backfill of vectors for recall by meaning)
- `sleep`: sleep, revert
- `recall`: recall
- `export`: export --markdown
- `forget`: forget a message, conversation, memory or anima (soft, or --purge)
- `demo`: demo
- `keys`: keys create / list / revoke (API keys of the HTTP service)
- `serve`: serve (HTTP), mcp (MCP server)
- `eval`: eval locomo, eval longmemeval (J score, or offline context measures)
- `replay`: snapshot, replay, diff
- `review`: review list / approve / reject

Each module registers its commands on the shared `app` (cli/app.py) when imported, and is
imported only when one of its commands runs: cli/app.py's COMMANDS names the module of each
command (and its one-line help for `anima --help`), so `anima recall` never loads the sleep
engine, Dagster or the HTTP server.
"""

from typing import Any

from anima_pipeline.cli.app import app

__all__ = ["SAMPLE", "app"]


def __getattr__(name: str) -> Any:
    # SAMPLE lives with the demo, whose module pulls in the sleep engine: only on demand
    if name == "SAMPLE":
        from anima_pipeline.cli.demo import SAMPLE

        return SAMPLE
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
