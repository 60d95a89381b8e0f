"""Fakes for the services we cannot run here, speaking their real protocols.

Used by the tests and by ``run_bot.py bench``: a fake vLLM (OpenAI-compatible SSE), a Twilio
Media Streams caller, a fake Twilio REST API, and the bot started as a separate process.
"""
