"""Call recordings (issue 36): both voices of every call, written as it goes, kept with the call's records.

``recorder``: the per-call writer and the pipeline observer that feeds it; ``files``: where a
recording lives, its length, retention and export.
"""
