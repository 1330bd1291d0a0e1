"""The faces a running agent talks to: the HTTP service (`http/`), the MCP server (`mcp.py`)
and the typed HTTP client (`client.py`), all thin over `anima_pipeline.memory.facade.AnimaMemory`."""
