"""What every call builder is given (``build_call``, the stock baseline's, the test lab's)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipecat.observers.base_observer import BaseObserver
from pipecat.transports.base_transport import BaseTransport

from bot.call.models import SharedModels
from bot.config import Config, Secrets

if TYPE_CHECKING:  # for the annotation only: the store is not loaded to build a request
    from bot.store.calls import CallLog


@dataclass(frozen=True)
class Resume:
    """A call taken over from a stream that ended (issue 46; ``bot/store/segments.py``), read from the records.

    Attributes:
        segment: Which of the call's media streams this is (1: the first resume).
        first_turn: The next turn record's index (the call's turns so far keep theirs).
        history: The model's context so far (user and assistant messages, oldest first).
        dialog: The dialog's snapshot after the last turn (``DialogState.snapshot``); None: not recorded.
        emergency: The emergency sentence said in this call (the number to call), said again first.
        quiet: No resume sentence: the call heard it already, or a drain handed the call over.
    """

    segment: int
    first_turn: int = 0
    history: tuple[dict, ...] = ()
    dialog: Mapping | None = None
    emergency: str | None = None
    quiet: bool = False


@dataclass(frozen=True)
class CallRequest:
    """One call to build: the line's config and models, the call's transport and identity.

    Attributes:
        config: The line's config (a test lab's faulted call gets its own copy).
        secrets: The LLM key and Twilio credentials.
        models: The process-wide models (``load_models``).
        transport: The call's transport (Twilio websocket or WebRTC).
        call_id: Twilio's CallSid, or a browser call's id (``bot.app.browser.browser_call_id``).
        in_rate: Pipeline input rate in Hz (Whisper and Silero: 16 kHz).
        out_rate: Pipeline output rate in Hz (the phone's 8 kHz: no resampling burst).
        qa: A browser QA call (RTVI on, turn records marked as QA).
        observers: Extra pipeline observers (the QA page's live view).
        records: The process's records database (``CallLog``): turns are written as they happen
            and tickets are made and looked up there; None without records.
        stream_parameters: The Twilio stream's customParameters (our webhook's token only; nothing
            in the product reads them, the test lab's builder may).
        resume: A resumed call's past (its segment, turns and dialog); None for a new call.
    """

    config: Config
    secrets: Secrets
    models: SharedModels
    transport: BaseTransport
    call_id: str
    in_rate: int = 16000
    out_rate: int = 8000
    qa: bool = False
    observers: tuple[BaseObserver, ...] = ()
    records: CallLog | None = None
    stream_parameters: Mapping[str, str] = field(default_factory=dict)
    resume: Resume | None = None
