"""Builds one call's pipeline from the process-wide models: the same for phone and browser.

transport in → STT → user aggregator (Silero VAD, VAD turn start with barge-in that lets
backchannels by, speech-timeout turn stop) → structured LLM → TTS → transport out → assistant
aggregator.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from loguru import logger
from pipecat.frames.frames import EndFrame, EndWorkerFrame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMAssistantAggregatorParams,
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.transports.base_transport import BaseTransport
from pipecat.turns.user_mute import MuteUntilFirstBotCompleteUserMuteStrategy
from pipecat.turns.user_start import TranscriptionUserTurnStartStrategy, VADUserTurnStartStrategy
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from bot import DATA_DIR, languages
from bot.config import Config, Secrets
from bot.dialog.calendar import LineCalendar
from bot.dialog.domain import Domain, DomainError, load_domain
from bot.dialog.emergency import EmergencyRules
from bot.dialog.intake import Intake
from bot.dialog.language_packs import LanguagePack, load_language, unserved_notice
from bot.dialog.language_switch import LanguageGuess, LanguageSwitcher, SwitchRule
from bot.dialog.policy import DialogPolicy
from bot.dialog.shortcuts import ShortcutMatcher, load_shortcuts
from bot.dialog.state import CannedReplies, DialogState
from bot.knowledge import Knowledge
from bot.recording.recorder import call_recording
from bot.stages.backchannel_turn_start import Backchannels, BackchannelTurnStartStrategy
from bot.stages.dialog_llm import DialogLLMService
from bot.stages.keypad import KeypadProcessor
from bot.stages.korean_turn_stop import EndOfTurnRules, KoreanEndOfTurnStopStrategy
from bot.stages.silero_vad import SharedSileroVADAnalyzer, load_silero_session
from bot.stages.supertonic_tts import CannedAudio, SupertonicEngine, SupertonicTTSService
from bot.stages.whisper_stt import UnclearSpeechFrame, WhisperEngine, WhisperSTTProcessor
from bot.telemetry.turns import CallRecorder, TurnObserver


@dataclass
class DialogAssets:
    """Data files the dialog needs, read once."""

    domain: Domain
    shortcuts: ShortcutMatcher
    prompt: str
    canned: CannedReplies
    endpointing: EndOfTurnRules
    intake: Intake
    knowledge: Knowledge | None
    emergency: EmergencyRules
    calendar: LineCalendar
    backchannels: Backchannels | None = None
    # line.languages beyond Korean (bot/dialog/language_packs.py); a language without its files fails here.
    languages: dict[str, LanguagePack] = field(default_factory=dict)
    # Said once to a caller heard in a language the line does not serve (Korean, then English).
    unserved: tuple[str, ...] = ()
    menu_lines: dict[str, str] = field(default_factory=dict)  # language -> "For English, press 9."

    @classmethod
    def load(cls, config: Config) -> DialogAssets:
        domain = load_domain(config.path(config.llm.domain_file))
        emergency = EmergencyRules.load()
        unknown = [c.name for c in domain.emergencies if c.name not in emergency.kinds]
        if unknown:  # the model would flag a kind the policy cannot escalate
            raise DomainError(f"{config.llm.domain_file}: [[emergencies]] {unknown} are not kinds of "
                              f"emergency.toml ({', '.join(emergency.kinds)})")
        calendar = LineCalendar.from_config(config.line)
        assets = cls(
            languages={code: _with_hours(load_language(code, domain), calendar) for code in config.line.languages[1:]},
            unserved=unserved_notice(config.line.languages),
            domain=domain,
            shortcuts=load_shortcuts(config.path(config.llm.shortcuts_file), domain),
            prompt=config.path(config.llm.prompt_file).read_text(encoding="utf-8"),
            canned=CannedReplies.load(DATA_DIR / "replies.toml").with_hours(
                calendar.hours_phrase()),
            emergency=emergency,
            calendar=calendar,
            endpointing=EndOfTurnRules.load(config.path(config.turn.endpointing_file)),
            backchannels=Backchannels.load(config.path(config.turn.backchannels_file)),
            intake=Intake.load(DATA_DIR / "intake.toml", domain),
            knowledge=_knowledge(config.path(config.llm.faq_file), config.path(config.llm.directory_file),
                                 tuple(domain.category_names)) if config.llm.knowledge else None,
        )
        # The keypad menu's lines, each synthesized at startup in its own language (said in a Korean call).
        assets.menu_lines = {code: line for _key, code, line in language_menu(config, assets)}
        return assets

    def language_sentences(self, code: str) -> dict[str, str]:
        """Another language's fixed sentences (its canned replies, shortcut answers, the switch
        sentence) -> their names in ``heard``: synthesized at startup with its TTS tag."""
        pack = self.languages[code]
        ids = {s.reply.strip(): f"shortcut:{s.name}" for s in pack.shortcuts.shortcuts if s.reply}
        ids |= {pack.intake.text("ask_correction").strip(): "ask_correction", pack.switched.strip(): "language_switched"}
        ids |= {self.menu_lines[code]: "language_menu"} if code in self.menu_lines else {}
        ids |= {pack.recording_notice.strip(): "recording_notice"} if pack.recording_notice.strip() else {}
        return ids | {text: name for text, name in pack.canned.ids().items() if name != "busy"}

    def fixed_sentences(self, greeting: str, notice: str = "") -> list[str]:
        """Everything the bot says without the model: worth synthesizing once at startup."""
        return [greeting, *([notice] if notice else []),
                *(s for kind in self.emergency.kinds.values()
                  for s in (*kind.sentences, kind.question, *kind.stay, *kind.closing)),
                *self.unserved[:1],  # its English sentence is synthesized with its own tag when said
                *(text for text, name in self.canned.ids().items() if name != "busy"),  # busy: Twilio says it
                *(s.reply for s in self.shortcuts.shortcuts if s.reply),
                self.intake.text("ask_correction")]

    def sentence_ids(self, greeting: str, notice: str = "") -> dict[str, str]:
        """Fixed sentence -> the name turn records give it in ``heard`` (model sentences are "reply")."""
        ids = {s.reply.strip(): f"shortcut:{s.name}" for s in self.shortcuts.shortcuts if s.reply}
        for kind in self.emergency.kinds.values():
            ids |= {s.strip(): f"emergency:{kind.name}" for s in kind.sentences}
            ids[kind.question.strip()] = f"emergency_check:{kind.name}"
            ids |= {s.strip(): f"emergency_stay:{kind.name}" for s in kind.stay}
            ids |= {s.strip(): f"emergency_closing:{kind.name}" for s in kind.closing}
        ids |= {s.strip(): "unserved_language" for s in self.unserved}
        ids |= {notice.strip(): "recording_notice"} if notice else {}
        return ids | self.canned.ids() | {greeting.strip(): "greeting"}



def _with_hours(pack: LanguagePack, calendar: LineCalendar) -> LanguagePack:
    """The pack's ``{hours}`` filled in its own language, once (its sentences stay pre-synthesizable)."""
    return dataclasses.replace(pack, canned=pack.canned.with_hours(calendar.hours_phrase(language=pack.code)))


def _knowledge(faq: Path, directory: Path, categories: tuple[str, ...]) -> Knowledge:
    """Index the FAQ and directory once per file version (Kiwi's analyser takes ~1.5 s to load)."""
    key = (faq, faq.stat().st_mtime_ns, directory, directory.stat().st_mtime_ns, categories)
    if key not in _KNOWLEDGE:
        _KNOWLEDGE[key] = Knowledge.load(faq, directory, categories=list(categories))
    return _KNOWLEDGE[key]


_KNOWLEDGE: dict[tuple, Knowledge] = {}


@dataclass
class SharedModels:
    """Loaded once per process at startup, shared by every call. Holds no per-call state."""

    whisper: WhisperEngine
    tts: SupertonicEngine
    vad_session: object
    assets: DialogAssets
    canned_audio: CannedAudio | None = None
    # Normalized text of each canned sentence -> its name (what ``TurnRecord.heard`` lists).
    heard_ids: dict[str, str] = field(default_factory=dict)
    self_timing: object | None = None  # bot.ops.selftime.SelfTiming of this start (serve sets it)


def make_policy(config: Config, assets: DialogAssets, clock=None) -> DialogPolicy:
    """One line's rules; ``clock`` runs a call as if at another time (``chat --at``). Each other
    language of the line gets the same rules with its own words (``DialogPolicy.for_language``)."""
    def policy(shortcuts, canned, intake) -> DialogPolicy:
        made = DialogPolicy(shortcuts=shortcuts, canned=canned, intake=intake,
                            can_transfer=bool(config.call.transfer_number), emergency=assets.emergency,
                            emergency_transfer=config.call.emergency_transfer, calendar=assets.calendar,
                            clock=clock, offer_callback=config.line.offer_callback,
                            offer_sms=config.sms.enabled and config.sms.after_ticket)
        made.unserved = assets.unserved
        return made

    main = policy(assets.shortcuts, assets.canned, assets.intake)
    for code, pack in assets.languages.items():
        sibling = policy(pack.shortcuts, pack.canned, pack.intake)
        sibling.instruction, sibling.language = pack.instruction, code
        if config.recording.enabled and config.call.recording_notice:
            sibling.recording_notice = pack.recording_notice
        main.siblings[code] = sibling
    main.siblings |= {"ko": main}
    for sibling in main.siblings.values():
        sibling.siblings = main.siblings
    # Each menu line is said in its own language, whatever the call's (``tagged``: the TTS reads it so).
    main.menu = {key: (code, assets.languages[code].switched, languages.tagged(line, code))
                 for key, code, line in language_menu(config, assets)}
    return main


def language_menu(config: Config, assets: DialogAssets) -> list[tuple[str, str, str]]:
    """The keypad menu: (key, language, its line said after the greeting) for the line's second
    language (``line.language_key``) and each of ``line.language_keys``, in the line's order."""
    return [(key, code, assets.languages[code].menu.format(key=key))
            for code, key in config.line.menu_keys().items()]


def new_dialog_state(config: Config, assets: DialogAssets) -> DialogState:
    """A call's state: its language starts as the line's first; auto detection gets a switcher."""
    state = DialogState(language=config.line.languages[0])
    if config.stt.language == "auto":
        stt = config.stt
        state.switcher = LanguageSwitcher(config.line.languages, SwitchRule(
            switch_p=stt.language_switch_p, repeat_p=stt.language_repeat_p, min_words=stt.language_min_words,
            min_secs=stt.language_min_secs))
    state.language_keys = {key: code for key, code, _line in language_menu(config, assets)}
    return state


def stt_language_of(config: Config, dialog: DialogState) -> Callable[[], str]:
    """The language Whisper decodes each segment in: the call's, once it has left the line's first
    (auto detection or the keypad menu); until then a forced ``stt.language`` holds."""
    start = config.line.languages[0]
    forced = None if config.stt.language == "auto" else config.stt.language

    def language() -> str:
        if forced is not None and dialog.language == start:
            return forced
        return dialog.language

    return language


def make_llm(config: Config, secrets: Secrets, assets: DialogAssets, *, clock=None, **kwargs) -> DialogLLMService:
    return DialogLLMService(
        config=config.llm,
        domain=assets.domain,
        shortcuts=assets.shortcuts,
        prompt_template=assets.prompt,
        canned=assets.canned,
        api_key=secrets.llm_api_key,
        can_transfer=bool(config.call.transfer_number),
        intake=assets.intake,
        knowledge=assets.knowledge,
        policy=make_policy(config, assets, clock),
        **kwargs,
    )


def user_turn_params(config: Config, rules: EndOfTurnRules, *, vad=None, on_decision=None,
                     unclear_reply=None, backchannels: Backchannels | None = None,
                     line_playing=None) -> LLMUserAggregatorParams:
    """Turn-taking: VAD starts a turn (barge-in on); the ending of what was said picks the wait.

    With ``backchannels``, speech over the bot interrupts once it lasts ``turn.barge_in_secs`` or
    its words are more than a backchannel; ``line_playing`` is the transport's clock of unplayed
    bot audio (``line_clock``)."""
    if config.turn.korean_endpointing:
        waits = {"final": config.turn.final_wait_secs, "continuing": config.turn.continuing_wait_secs,
                 "default": config.turn.speech_timeout_secs}
        stop = KoreanEndOfTurnStopStrategy(rules=rules, waits=waits, speculate=config.turn.speculative_reply,
                                           on_decision=on_decision, unclear_reply=unclear_reply)
    else:
        # Speech timeout, not smart-turn: smart-turn races the segmented STT (see notes).
        stop = SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=config.turn.speech_timeout_secs)
    return LLMUserAggregatorParams(
        vad_analyzer=vad,
        user_turn_strategies=UserTurnStrategies(
            # A transcript that arrives after its turn was closed (STT overloaded past
            # stop_timeout_secs) opens a turn of its own: answered late, not merged into the next.
            start=[_vad_start(config, backchannels, line_playing),
                   TranscriptionUserTurnStartStrategy(enable_interruptions=False)],
            stop=[stop],
        ),
        user_mute_strategies=[MuteUntilFirstBotCompleteUserMuteStrategy()] if config.call.mute_during_greeting else [],
        user_turn_stop_timeout=config.turn.stop_timeout_secs,
        # Pipecat's idle timer: runs only while the bot waits for the caller (never during its speech).
        user_idle_timeout=config.call.idle_prompt_secs,
    )


def _vad_start(config: Config, backchannels: Backchannels | None, line_playing):
    if backchannels is None or config.turn.barge_in_secs <= 0:
        return VADUserTurnStartStrategy(enable_interruptions=True)
    return BackchannelTurnStartStrategy(backchannels=backchannels, barge_in_secs=config.turn.barge_in_secs,
                                        line_playing=line_playing, vad_stop_secs=config.vad.stop_secs)


def line_clock(transport: BaseTransport):
    """The phone line's clock of bot audio Twilio has not played yet (``PhoneSerializer``), or None.

    Pipecat's websocket output sends audio at twice real time, so the pipeline's "bot stopped
    speaking" comes while the caller still hears the last seconds of a reply. The transport keeps
    its serializer in its params (no public accessor in Pipecat 1.14).
    """
    serializer = getattr(getattr(transport, "_params", None), "serializer", None)
    return getattr(serializer, "bot_audio_pending", None)


@dataclass
class CallSession:
    """One running call: its worker and what it records."""

    worker: PipelineWorker
    recorder: CallRecorder
    dialog: DialogState
    llm: DialogLLMService
    stt: WhisperSTTProcessor
    tts: SupertonicTTSService
    end_reason: str | None = None  # how the call ended, when the transport knows (caller_hangup, ...)
    # The line's rules for the call's edges (greeting, callback opening): ours is the dialog stage's;
    # the stock baseline's plain LLM has none, so bot/app/stock.py gives one (its greeting says the same).
    policy: DialogPolicy | None = None


def build_call(
    *,
    config: Config,
    secrets: Secrets,
    models: SharedModels,
    transport: BaseTransport,
    call_id: str,
    in_rate: int = 16000,
    out_rate: int = 8000,
    qa: bool = False,
    observers: list | None = None,
    records=None,
    stream_parameters: dict | None = None,
) -> CallSession:
    """Assemble one call's pipeline. Phone: 16 kHz in (Whisper, Silero), 8 kHz out (no resampling burst).

    ``records``: the process's records database (``CallLog``): turns are written as they happen and
    tickets are made and looked up there. ``stream_parameters``: the Twilio stream's customParameters
    (our webhook's token only; nothing here reads them, a test lab's builder may).
    """
    recorder = CallRecorder(call_id, qa=qa, sink=(lambda rec: records.turn(call_id, rec)) if records else None)
    dialog = new_dialog_state(config, models.assets)

    def on_stt(result):
        """Auto detection: the call's language follows what Whisper heard (the record is the observer's)."""
        if result.detected is not None and result.accepted:
            words = len(result.text.split())
            guess = LanguageGuess(result.detected, result.language_p, words, result.audio_secs)
            if dialog.observe_language(guess):
                logger.info("call language -> {} (Whisper p={:.2f})", dialog.language, result.language_p)
            if result.heard and dialog.observe_heard(LanguageGuess(result.heard, result.heard_p, words, result.audio_secs)):
                logger.warning("caller heard in {} (Whisper p={:.2f}), a language this line does not serve: "
                               "telling them where to call", result.heard, result.heard_p)

    auto = config.stt.language == "auto"
    stt = WhisperSTTProcessor(engine=models.whisper, language=config.line.languages[0] if auto else config.stt.language,
                              on_result=on_stt, unclear_min_segment_secs=config.stt.unclear_min_segment_secs,
                              detect=tuple(config.line.languages) if auto else None,
                              decode_p=config.stt.language_repeat_p, language_of=stt_language_of(config, dialog))
    vad = SharedSileroVADAnalyzer(session=models.vad_session, config=config.vad)

    def on_decision(kind: str, wait: float):
        recorder.current.endpoint_kind, recorder.current.endpoint_wait_ms = kind, wait * 1000

    context = LLMContext()
    user_agg, assistant_agg = LLMContextAggregatorPair(
        context,
        user_params=user_turn_params(config, models.assets.endpointing, vad=vad, on_decision=on_decision,
                                     unclear_reply=lambda: llm.policy.for_language(dialog.language).canned.unclear,
                                     backchannels=models.assets.backchannels, line_playing=line_clock(transport)),
        assistant_params=LLMAssistantAggregatorParams(),
    )
    llm = make_llm(config, secrets, models.assets, dialog=dialog, speech_end=lambda: recorder.current.speech_end,
                   records=records, call_id=call_id)
    tags = {code: pack.tag for code, pack in models.assets.languages.items()}
    tts = SupertonicTTSService(
        engine=models.tts, voice=config.tts.voice, frame_ms=config.tts.frame_ms,
        language_of=(lambda: tags.get(dialog.language, "ko")) if tags else None,
        canned=models.canned_audio,
    )
    # Both voices, written as the call goes (recording.enabled): an observer of the two transports.
    observers = [*(observers or []), *call_recording(config, call_id, in_rate=in_rate, out_rate=out_rate, records=records)]
    session = assemble_session(config=config, transport=transport, stt=stt, user_agg=user_agg, llm=llm, tts=tts,
                               assistant_agg=assistant_agg, recorder=recorder, dialog=dialog, in_rate=in_rate,
                               out_rate=out_rate, qa=qa, observers=observers, keypad=KeypadProcessor(dialog=dialog),
                               turn_observer=TurnObserver(recorder, sentence_names=models.heard_ids))
    guard_call(session, user_agg, config, canned_audio=models.canned_audio)
    return session


def guard_call(session: CallSession, user_agg, config: Config, canned_audio: CannedAudio | None = None) -> None:
    """The edges of a call end in speech, never silence.

    * Idle caller: after ``call.idle_prompt_secs`` of silence (Pipecat's idle timer, which runs only
      while the bot waits for the caller) "여보세요, 듣고 계신가요?"; as long again: goodbye and hang-up.
    * The STT raising on a segment: the turn ends like unclear speech ("잘 못 들었습니다…").
    * The TTS raising on a sentence: the canned apology, played from memory at once (once per turn;
      not queued as a sentence: it would wait behind the failed answer's silent audio context).
    * A second turn with a failing stage: the polite end (opening hours), then hang-up.

    What to say after a failure is the dialog policy's (``DialogPolicy.stage_failed``); the words are
    the call's language's (an English call hears "Hello, are you still there?").
    """
    recorder, stt, tts = session.recorder, session.stt, session.tts
    state = {"idle": 0, "failed_turns": set()}

    def canned() -> CannedReplies:
        return session.llm.policy.for_language(session.dialog.language).canned

    async def end_politely(processor, reason: str):
        logger.error("call {}: {}; ending the call politely", recorder.call_id[-6:], reason)
        session.end_reason = session.end_reason or reason.split(":")[0]
        await processor.queue_frame(TTSSpeakFrame(canned().closing_hours))
        await processor.queue_frame(EndWorkerFrame(reason=reason))

    def stage_failed(stage: str, error) -> str | None:
        """Record the failure; what the policy says to do about it."""
        rec = recorder.current
        rec.error = rec.error or f"{stage}: {str(getattr(error, 'error', error))[:200]}"
        first_of_turn = rec.index not in state["failed_turns"]
        state["failed_turns"].add(rec.index)
        return session.llm.policy.stage_failed(stage, len(state["failed_turns"]), first_of_turn)

    @user_agg.event_handler("on_user_turn_started")
    async def _caller_spoke(_agg, _strategy):
        state["idle"] = 0

    @user_agg.event_handler("on_user_backchannel")
    async def _caller_acknowledged(_agg, _message):
        recorder.current.backchannels += 1  # the reply being spoken: neither interrupted nor a turn

    @user_agg.event_handler("on_user_turn_idle")
    async def _caller_idle(agg):
        state["idle"] += 1
        if state["idle"] == 1:
            logger.info("call {}: caller silent for {:.0f} s: asking if they are there", recorder.call_id[-6:],
                        config.call.idle_prompt_secs)
            await agg.push_frame(TTSSpeakFrame(canned().idle_prompt))
            return
        logger.info("call {}: caller still silent: goodbye and hang-up", recorder.call_id[-6:])
        session.end_reason = session.end_reason or "caller_idle"
        await agg.push_frame(TTSSpeakFrame(canned().idle_goodbye))
        await agg.push_frame(EndWorkerFrame(reason="caller idle"))

    @stt.event_handler("on_error")
    async def _stt_failed(processor, error):
        then = stage_failed("stt", error)
        if then == "end":
            await end_politely(tts, "stt_failed: twice in one call")
        elif then == "unclear" and config.turn.korean_endpointing:
            # The turn ends after the normal wait with "please say that again", as for unreadable speech.
            await processor.push_frame(UnclearSpeechFrame(reason="stt_error", audio_secs=0.0))
        elif then == "unclear":
            await tts.queue_frame(TTSSpeakFrame(canned().unclear))

    @tts.event_handler("on_error")
    async def _tts_failed(processor, error):
        then = stage_failed("tts", error)
        if then == "end":
            await end_politely(processor, "tts_failed: twice in one call")
        elif then == "apology":
            await play_canned(processor, canned().apology, "apology")

    async def play_canned(tts_service, text: str, name: str):
        hit = (canned_audio.get(text, tts_service.sample_rate, config.tts.voice, tts_service.language_tag())
               if canned_audio else None)
        if hit is None:
            await tts_service.queue_frame(TTSSpeakFrame(text))
            return
        recorder.current.heard.append(name)
        step = max(1, tts_service.sample_rate * config.tts.frame_ms // 1000) * 2
        for i in range(0, len(hit.pcm), step):
            await tts_service.push_frame(TTSAudioRawFrame(hit.pcm[i : i + step], tts_service.sample_rate, 1))


def assemble_session(*, config: Config, transport: BaseTransport, stt, user_agg, llm, tts, assistant_agg,
                     recorder: CallRecorder, dialog: DialogState, in_rate: int, out_rate: int, qa: bool,
                     observers: list | None, keypad=None, turn_observer: TurnObserver | None = None,
                     policy: DialogPolicy | None = None) -> CallSession:
    """The stages in call order, in one worker with the call's turn records (also the stock baseline's:
    its ``turn_observer`` reads its stock STT and LLM)."""
    stages = [transport.input(), stt, user_agg, *([keypad] if keypad else []), llm, tts, transport.output(),
              assistant_agg]
    pipeline = Pipeline(stages)
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(
            audio_in_sample_rate=in_rate,
            audio_out_sample_rate=out_rate,
            enable_metrics=True,
            enable_usage_metrics=True,
        ),
        observers=[turn_observer or TurnObserver(recorder), *(observers or [])],
        idle_timeout_secs=config.call.idle_timeout_secs,
        enable_rtvi=qa,
    )
    return CallSession(worker=worker, recorder=recorder, dialog=dialog, llm=llm, stt=stt, tts=tts,
                       policy=policy or llm.policy)


async def speak_greeting(session: CallSession, greeting: str, notice: str = "") -> None:
    """The bot speaks first, straight to TTS (no LLM); the greeting becomes the first assistant message.
    Then, once: the recording notice (``call.recording_notice``) and a holiday's name."""
    notes = session.policy.greeting_notes(notice)
    # "For English, press 9." last, where a caller expects a menu
    notes += tuple(line for _language, _switched, line in session.policy.menu.values())
    session.dialog.last_reply = " ".join((greeting, *notes))
    session.recorder.current.mark("first_sentence")
    session.recorder.current.line_open = session.policy.line_open()
    await session.worker.queue_frames([TTSSpeakFrame(greeting), *(TTSSpeakFrame(n) for n in notes)])


async def speak_callback_opening(session: CallSession, number: str | None, ticket: dict | None) -> None:
    """A booked callback answered by a person: instead of the greeting, why we call, the ticket's
    status and (a person available) the transfer, which ends the bot's part once it is heard."""
    if ticket and ticket.get("language") in session.policy.siblings:
        session.dialog.set_language(ticket["language"])  # the language the ticket was taken in
    answer = session.policy.for_language(session.dialog.language).callback_answered(number, ticket)
    answer.change.apply(session.dialog, answer.reply)
    session.recorder.current.mark("first_sentence")
    session.recorder.current.line_open = session.policy.line_open()
    session.recorder.current.reply = answer.reply  # the desk reads what the called-back person heard
    frames = [TTSSpeakFrame(s) for s in answer.sentences]
    if answer.change.transfer:
        frames.append(EndFrame(reason="transfer"))  # the serializer hands the call to the desk (warm)
    await session.worker.queue_frames(frames)


def check_noise_filter(config: Config) -> None:
    """At startup: log the input noise filter when on; a missing ``pyrnnoise`` stops the process."""
    if config.audio.noise_filter == "none":
        return
    from bot.core.errors import StartupError

    try:
        import pyrnnoise  # noqa: F401
    except ImportError as e:
        raise StartupError(f"audio.noise_filter = {config.audio.noise_filter!r} needs the pyrnnoise package "
                           f"(pip install pyrnnoise==0.4.5), or set audio.noise_filter = \"none\": {e}") from e
    logger.info("audio.noise_filter = {}: RNNoise noise suppression on the caller's audio before VAD and STT",
                config.audio.noise_filter)


def make_audio_in_filter(config: Config):
    """A fresh input filter for one call's transport params (it keeps per-call state), or None."""
    if config.audio.noise_filter == "none":
        return None
    from pipecat.audio.filters.rnnoise_filter import RNNoiseFilter

    return RNNoiseFilter()


def load_models(config: Config) -> SharedModels:
    """Load every model once (blocking: run at startup, before serving calls)."""
    from bot.modelfiles.manifest import resolve_whisper_model

    check_noise_filter(config)
    logger.info("loading models (once per process)")
    whisper = WhisperEngine(config.stt, resolve_whisper_model(config.stt, config.base_dir), min_avg_logprob=config.stt.min_avg_logprob)
    whisper.warmup()
    tts = SupertonicEngine(config.tts, base_dir=config.base_dir)
    tts.warmup(config.tts.warmup_lengths)
    assets = DialogAssets.load(config)
    canned = None
    if config.tts.canned_audio:
        canned = CannedAudio().build(tts, assets.fixed_sentences(config.call.greeting, config.call.recording_notice),
                                     voice=config.tts.voice,
                                     sample_rates=list(CANNED_RATES))
        for code, pack in assets.languages.items():
            canned.build(tts, list(assets.language_sentences(code)), voice=config.tts.voice,
                         sample_rates=list(CANNED_RATES), language=pack.tag)
    heard_ids = {}
    if canned is not None:
        named = [("ko", assets.sentence_ids(config.call.greeting, config.call.recording_notice))]
        named += [(pack.tag, assets.language_sentences(code)) for code, pack in assets.languages.items()]
        for tag, ids in named:
            for text, name in ids.items():
                hit = canned.get(text, CANNED_RATES[0], config.tts.voice, tag)
                if hit is not None:
                    heard_ids[hit.normalized_text] = name
    return SharedModels(whisper=whisper, tts=tts, vad_session=load_silero_session(), assets=assets, canned_audio=canned,
                        heard_ids=heard_ids)


# Output rates of the phone path (8 kHz) and the WebRTC QA page.
CANNED_RATES = (8000, 24000)
