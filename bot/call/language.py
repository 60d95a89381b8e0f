"""A call's language: where it starts and how detection moves it.

It lives in one place, ``DialogState.language``, written only by the policy's ``Change.apply``:
the STT says what it heard (``LanguageHeardFrame``), the keypad menu chooses, and the dialog stage
tells the STT and the TTS with settings frames (``bot/stages/dialog_llm.py``)."""

from __future__ import annotations

from bot.call.assets import DialogAssets, language_menu
from bot.config import Config
from bot.dialog.language_switch import LanguageSwitcher, SwitchRule, UnservedRule
from bot.dialog.state import DialogState


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
