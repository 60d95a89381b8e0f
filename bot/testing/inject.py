"""Faults injected into one call of a test lab server (``python -m bot.testing.lab_server --fault-injection``).

The caller puts ``fault`` in the media stream's ``customParameters`` (the simulator can; a real
Twilio call only carries what our webhook's TwiML set, and the product server never reads it:
the lab's call builder does). The call then runs with a broken part; every other call is untouched:

* ``llm:<fault>``: the call's LLM requests go to the fake LLM's per-request fault URL
  (``bot/testing/fake_llm.py``: ``slow``, ``slow-<ms>``, ``hang``, ``500``, ``invalid_json``,
  ``cut_off``, ``drop``, ``down``), or for ``llm:refused`` to a closed port (connection refused).
* ``stt_error``: every transcription of the call raises.
* ``tts_error``: every synthesis of the call raises (pre-synthesized canned sentences still play:
  they come from memory).
* ``pipeline_raise:N`` (the lab's call builder, ``raise_mid_turn``): the caller's N-th turn reaches the
  dialog stage and an exception the pipeline cannot go on from is raised there (Pipecat's fatal error:
  the worker is cancelled and the stream closes without the bot's goodbye, issue 46).

And one process-wide switch, ``records_down_switch`` (``LAB_RECORDS_DOWN_FILE``): while its file
exists every statement to the records database fails as an unreachable database's would.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

CLOSED_PORT_URL = "http://127.0.0.1:9/v1"  # the discard port: nothing listens, the connection is refused


class InjectedFault(RuntimeError):
    pass


class _Broken:
    """Delegates to a shared engine, except the one method that raises."""

    def __init__(self, engine, method: str, message: str):
        self._engine, self._method, self._message = engine, method, message

    def __getattr__(self, name):
        if name == self._method:
            return self._raise
        return getattr(self._engine, name)

    def _raise(self, *args, **kwargs):
        raise InjectedFault(self._message)


class _BrokenAsync(_Broken):
    async def _raise(self, *args, **kwargs):  # type: ignore[override]
        raise InjectedFault(self._message)


def llm_fault_url(base_url: str, fault: str) -> str:
    """The fake LLM's URL that answers every request with ``fault`` (``.../v1`` -> ``.../fault/<f>/v1``)."""
    if fault == "refused":
        return CLOSED_PORT_URL
    root = base_url.rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return f"{root}/fault/{fault}/v1"


def apply_call_fault(fault: str, config, models):
    """(config, models) for one call with ``fault`` applied (see the module doc)."""
    if fault.startswith("llm:"):
        llm = dataclasses.replace(config.llm, base_url=llm_fault_url(config.llm.base_url, fault[4:]))
        return dataclasses.replace(config, llm=llm), models
    if fault == "stt_error":
        return config, dataclasses.replace(models, whisper=_BrokenAsync(models.whisper, "transcribe_async",
                                                                        "injected STT fault"))
    if fault == "tts_error":
        return config, dataclasses.replace(models, tts=_Broken(models.tts, "synthesize", "injected TTS fault"))
    raise ValueError(f"unknown injected fault {fault!r}")


PIPELINE_RAISE = "pipeline_raise"


def raise_mid_turn(session, turn: int = 1) -> None:
    """The call's ``turn``-th caller turn (its context reaching the dialog stage, the answer not yet
    asked for) raises there, fatally: the pipeline is cancelled as by any error it cannot go on from."""
    from pipecat.frames.frames import LLMContextFrame

    seen = 0

    async def before(processor, frame) -> None:
        nonlocal seen
        if not isinstance(frame, LLMContextFrame):
            return
        seen += 1
        if seen != turn:
            return
        error = InjectedFault(f"injected: the pipeline raised in turn {turn}")
        with warnings.catch_warnings():  # Pipecat's deprecated `fatal`: still what a crash does today
            warnings.simplefilter("ignore")
            await processor.push_error(str(error), exception=error, fatal=True)

    session.llm.add_event_handler("on_before_process_frame", before)


def records_down_switch(path: Path) -> None:
    """Every SQLAlchemy statement of this process fails while ``path`` exists (the records database
    unreachable); the test creates and removes the file."""
    import sqlalchemy as sa

    def check(_conn, _cursor, statement, parameters, _context, _executemany) -> None:
        if path.exists():
            raise sa.exc.OperationalError(statement, parameters,
                                          ConnectionRefusedError("records database unreachable (TEST LAB)"))

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", check)
