"""Foundations: data files, errors, the background-task helper, deadlines, WAV I/O. Imports nothing from bot."""
