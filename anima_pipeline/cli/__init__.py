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

Each module registers its commands on the shared `app` (cli/app.py) when imported here.
"""

from anima_pipeline.cli import (  # noqa: F401  (registers commands)
    demo,
    embed,
    eval,
    export,
    forget,
    keys,
    recall,
    replay,
    review,
    serve,
    sleep,
    store,
)
from anima_pipeline.cli.app import app
from anima_pipeline.cli.demo import SAMPLE

# `anima --help` lists the commands in the order a user meets them (Typer keeps the order of
# registration, which is the import order above); command groups (db, keys, eval, …) follow.
ORDER_OF_USE = (
    "demo", "import", "sleep", "status", "recall", "export", "revert", "forget", "embed",
    "snapshot", "replay", "diff", "serve", "mcp",
)  # fmt: skip
app.registered_commands.sort(
    key=lambda c: ORDER_OF_USE.index(c.name) if c.name in ORDER_OF_USE else len(ORDER_OF_USE)
)

__all__ = ["SAMPLE", "app"]
