"""Model files: the manifest, downloads and checks, the stand-in TTS, the local LLM server."""
