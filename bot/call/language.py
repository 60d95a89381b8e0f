"""A call's language: where it starts, what Whisper decodes in and the TTS speaks, and how detection moves it."""

from __future__ import annotations

from loguru import logger

from bot.call.assets import DialogAssets, language_menu
from bot.config import Config
from bot.dialog.language_switch import LanguageGuess, LanguageSwitcher, SwitchRule, UnservedRule
from bot.dialog.state import DialogState
from bot.stages.whisper import TranscriptResult


def new_dialog_state(config: Config, assets: DialogAssets) -> DialogState:
    """A call's state: its language starts as the line's first; auto detection gets a switcher."""
    state = DialogState(language=config.line.languages[0])
    if config.stt.language == "auto":
        stt = config.stt
        state.switcher = LanguageSwitcher(config.line.languages, SwitchRule(
            switch_p=stt.language_switch_p, repeat_p=stt.language_repeat_p, min_words=stt.language_min_words,
            min_secs=stt.language_min_secs), UnservedRule(
            p=stt.unserved_p, served_p=stt.unserved_served_p, turns=stt.unserved_turns,
            long_secs=stt.unserved_long_secs))
    state.language_keys = {key: code for key, code, _line in language_menu(config, assets)}
    return state


class CallLanguage:
    """The call's language as one object the stages are given, not closures over the dialog state:
    Whisper asks it what to decode in and tells it what it heard (``STTLanguage``); the TTS asks it
    which tag to speak with (``TTSLanguage``). The dialog state holds the language; the policy and the
    keypad move it too."""

    def __init__(self, config: Config, dialog: DialogState, tags: dict[str, str]) -> None:
        self._dialog = dialog
        self._start = config.line.languages[0]
        # A forced stt.language holds until the call leaves the line's first language.
        self._forced = None if config.stt.language == "auto" else config.stt.language
        self._tags = tags  # the line's other languages' TTS tags; empty: a Korean-only line

    def stt_language(self) -> str:
        """The language Whisper decodes the next segment in."""
        if self._forced is not None and self._dialog.language == self._start:
            return self._forced
        return self._dialog.language

    def tts_tag(self) -> str | None:
        """The TTS tag of the call's language; None on a Korean-only line (synthesized as before)."""
        return self._tags.get(self._dialog.language, "ko") if self._tags else None

    def heard(self, result: TranscriptResult) -> None:
        """With auto detection the call's language follows what Whisper heard (the record is the observer's)."""
        dialog = self._dialog
        if result.detected is None or not result.accepted:
            return
        # The engine sets each language with its probability (TranscriptResult).
        assert result.language_p is not None, "a detected language without its probability"
        words = len(result.text.split())
        guess = LanguageGuess(result.detected, result.language_p, words, result.audio_secs)
        if dialog.observe_language(guess):
            logger.info("call language -> {} (Whisper p={:.2f})", dialog.language, result.language_p)
        # ``heard`` comes with ``heard_p``: the second test only tells the checker so.
        if result.heard and result.heard_p is not None and dialog.observe_heard(
                LanguageGuess(result.heard, result.heard_p, words, result.audio_secs, served_p=result.language_p)):
            logger.warning("caller heard in {} (Whisper p={:.2f}), a language this line does not serve: "
                           "telling them where to call", result.heard, result.heard_p)
