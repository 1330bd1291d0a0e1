"""The OpenAI-compatible engine: the chat-completions API (OpenAI, vLLM, Ollama, llama.cpp's
server, LiteLLM) through the official openai SDK."""
