"""One call: assembling the stages and what a call does when one fails.

assets (the data files), models (loaded once per process), wiring (policy and dialog stage),
language, turn_taking, request (``CallRequest``), session (``CallSession``), build (``build_call``),
guard (failures and silences), openings (greeting, callback), noise_filter.
"""
