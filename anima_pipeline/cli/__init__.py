"""The `anima` command line, one module per command group:

- `store`: db migrate / stop, import, status
- `sleep`: sleep, revert
- `recall`: recall
- `export`: export --markdown
- `demo`: demo

Each module registers its commands on the shared `app` (cli/app.py) when imported here.
"""

from anima_pipeline.cli import demo, export, recall, sleep, store  # noqa: F401  (registers commands)
from anima_pipeline.cli.app import app
from anima_pipeline.cli.demo import SAMPLE

__all__ = ["SAMPLE", "app"]
