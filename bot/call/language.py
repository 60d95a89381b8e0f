"""A call's language: where it starts, what Whisper decodes in, and how detection moves it."""

from __future__ import annotations

from collections.abc import Callable

from loguru import logger

from bot.call.assets import DialogAssets, language_menu
from bot.config import Config
from bot.dialog.language_switch import LanguageGuess, LanguageSwitcher, SwitchRule
from bot.dialog.state import DialogState
from bot.stages.whisper import TranscriptResult


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


def follow_heard_language(dialog: DialogState) -> Callable[[TranscriptResult], None]:
    """The STT's ``on_result``: with auto detection the call's language follows what Whisper heard
    (the record is the observer's)."""

    def on_stt(result: TranscriptResult) -> None:
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
                LanguageGuess(result.heard, result.heard_p, words, result.audio_secs)):
            logger.warning("caller heard in {} (Whisper p={:.2f}), a language this line does not serve: "
                           "telling them where to call", result.heard, result.heard_p)

    return on_stt
