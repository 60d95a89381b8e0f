"""Issue 24: the caller's language (switch rule, English words, keypad menu, config checks)."""

from types import SimpleNamespace

import pytest
from pipecat.services.settings import TTSSettings

from bot.call.assets import DialogAssets
from bot.call.language import new_dialog_state
from bot.call.wiring import make_policy
from bot.config import ConfigError, load_config
from bot.dialog.language_switch import LanguageGuess, LanguageSwitcher
from bot.dialog.policy import KeyBuffer, Speak
from bot.dialog.state import DialogState
from bot.languages.en.normalize import normalize_english
from bot.stages.supertonic import SupertonicTTSService
from tests.conftest import ROOT


def g(lang, p, words=5, secs=2.0):
    return LanguageGuess(lang, p, words, secs)


def test_one_sure_turn_switches_and_korean_switches_back():
    s = LanguageSwitcher(["ko", "en"])
    assert s.observe(g("en", 0.91)) == "en"
    assert s.observe(g("ko", 0.95)) == "ko"


def test_two_plainer_turns_in_a_row_switch():
    s = LanguageSwitcher(["ko", "en"])
    assert s.observe(g("en", 0.6)) == "ko"
    assert s.observe(g("en", 0.6)) == "en"


def test_a_korean_turn_between_breaks_the_run():
    s = LanguageSwitcher(["ko", "en"])
    s.observe(g("en", 0.6))
    s.observe(g("ko", 0.9))
    assert s.observe(g("en", 0.6)) == "ko"


@pytest.mark.parametrize("guess", [g("en", 0.99, words=1), g("en", 0.99, secs=0.5), g("th", 0.99), g("en", 0.3)])
def test_never_on_one_word_short_speech_unlisted_language_or_low_p(guess):
    s = LanguageSwitcher(["ko", "en"])
    assert s.observe(guess) == "ko"
    assert s.observe(guess) == "ko"


def test_force_only_to_a_listed_language():
    s = LanguageSwitcher(["ko", "en"])
    s.force("en")
    assert s.current == "en"
    with pytest.raises(ValueError, match="line.languages"):
        s.force("ja")


def test_english_normalizer():
    assert normalize_english("Call 02-120-1234 at 3:30 pm.") == \
        "Call zero, two, one, two, zero, one, two, three, four at three thirty P M."
    assert normalize_english("It costs 15,000 won.") == "It costs fifteen thousand won."
    assert normalize_english("On 2026-12-03 at 9:00.") == "On December third, twenty twenty-six at nine o'clock."
    assert normalize_english("May 21st, 25% off") == "May twenty-first, twenty-five percent off"
    # The calendar's hours and openings: "9 AM", "1 PM"; an "a.m." keeps its letters, not its periods.
    assert normalize_english("from 9 AM to 6 PM, tomorrow at 9 a.m. then 11am.") == \
        "from nine A M to six P M, tomorrow at nine A M then eleven A M."
    assert normalize_english("I am 9 and Amy is 10") == "I am nine and Amy is ten"


def _config(*sets):
    return load_config(ROOT / "config.toml", ["line.languages=['ko','en']", *sets])


def test_config_names_the_key():
    with pytest.raises(ConfigError, match="line.languages"):
        load_config(ROOT / "config.toml", ["line.languages=['en','ko']"])
    with pytest.raises(ConfigError, match="stt.language"):
        load_config(ROOT / "config.toml", ["stt.language='auto'"])
    with pytest.raises(ValueError, match="line.languages: 'fr': no language folder bot/languages/fr/"):
        DialogAssets.load(load_config(ROOT / "config.toml", ["line.languages=['ko','fr']"]))


def test_english_policy_keypad_menu_and_words():
    config = _config("stt.language='auto'")
    assets = DialogAssets.load(config)
    policy = make_policy(config, assets)
    state = new_dialog_state(config, assets)
    assert state.switcher is not None and state.language == "ko"
    assert policy.menu["9"][2] == "<en>For English, press 9.</en>"  # said with the English tag
    keys = KeyBuffer()
    assert keys.press("9", state) == "9"
    answer = policy.keypad("9", state)
    assert isinstance(answer, Speak) and "English" in answer.reply
    answer.change.apply(state, answer.reply)
    assert state.language == "en" and state.switcher.current == "en"
    en = policy.for_language(state.language)
    assert en.instruction.startswith("The caller speaks English")
    assert en.decide("Thank you, bye!", state).reply == "Thank you for calling. Have a nice day."
    assert en.decide("Can you say that again?", state).sentences[0] == "Sure, once more."
    assert en.ticket_created("20260042").reply.startswith("Your complaint is filed. Your reception number is two, zero,")
    # Korean words in an English call are not English shortcuts; the Korean policy keeps its own.
    assert policy.for_language("ko") is policy
    assert policy.decide("감사합니다", DialogState()).rule == "thanks_goodbye"
    # After the switch the 9 is an ordinary digit again.
    assert KeyBuffer().press("9", state) is None


def test_default_config_has_no_menu_and_no_switcher():
    config = load_config(ROOT / "config.toml")
    assets = DialogAssets.load(config)
    assert make_policy(config, assets).menu == {}
    assert new_dialog_state(config, assets).switcher is None


async def test_the_tts_speaks_the_calls_language_tag_and_a_one_language_line_none():
    # The forced-language rule of the STT: tests/languages/test_language_in_band.py.
    engine = SimpleNamespace(voices={"F1": None})
    tts = SupertonicTTSService(engine=engine, voice="F1", language="ko")
    assert tts.language_tag() == "ko" and tts._tag() == "ko"
    await tts._update_settings(TTSSettings(language="en"))  # what a TTSUpdateSettingsFrame does
    assert tts.language_tag() == "en" and tts._tag() == "en"
    assert SupertonicTTSService(engine=engine, voice="F1")._tag() is None  # synthesized as before


@pytest.mark.parametrize("recorded", [True, False])
def test_a_switch_by_key_says_the_recording_notice_in_the_new_language_only_when_recording(recorded, tmp_path):
    extra = [f"recording.enabled={str(recorded).lower()}", f"recording.dir='{tmp_path}'",
             f"call.recording_notice='{'민원 처리를 위해 통화 내용이 녹음되고 기록됩니다.' if recorded else ''}'"]
    config = _config("stt.language='auto'", *extra)
    assets = DialogAssets.load(config)
    answer = make_policy(config, assets).keypad("9", new_dialog_state(config, assets))
    notice = assets.languages["en"].recording_notice
    en = assets.languages["en"]
    assert answer.sentences == ((en.switched, en.ai_notice, notice) if recorded else (en.switched, en.ai_notice))
