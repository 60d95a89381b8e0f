"""Serving: the ASGI app and its routes, the server process, the stock-Pipecat comparison server."""
