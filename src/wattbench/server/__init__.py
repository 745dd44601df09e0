"""The OpenAI protocol (completions, chat, SSE parsing, usage), server detection, /metrics scraping."""
