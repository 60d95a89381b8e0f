"""Foundations: data files, errors, the background-task helper, WAV I/O. Imports nothing from bot."""
