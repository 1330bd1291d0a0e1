"""The faces a running agent talks to: the HTTP service (`http.py`) and the MCP server
(`mcp.py`), both thin over `anima_pipeline.memory.AnimaMemory`."""
