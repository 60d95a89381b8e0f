"""Issue 47, part 5: a caller is told the line does not serve their language only on evidence: two
turns (or one long one) heard as the same unserved language, with the line's own languages unlikely;
never on one noisy turn (a Korean caller heard once as Japanese was sent to 1345)."""

from __future__ import annotations

from bot.call.assets import DialogAssets
from bot.call.language import new_dialog_state
from bot.call.wiring import make_policy
from bot.config import load_config
from bot.dialog.language_switch import LanguageGuess, LanguageSwitcher, UnservedRule


def _heard(lang: str, p: float, served_p: float, words: int = 5, secs: float = 2.5) -> LanguageGuess:
    return LanguageGuess(lang, p, words, secs, served_p=served_p)


def test_one_sure_turn_in_another_language_is_not_evidence():
    s = LanguageSwitcher(["ko", "en"])
    assert not s.unserved(_heard("ja", 0.97, 0.01))


def test_two_turns_heard_as_the_same_unserved_language_are():
    s = LanguageSwitcher(["ko", "en"])
    assert not s.unserved(_heard("zh", 0.97, 0.01))
    assert s.unserved(_heard("zh", 0.98, 0.02))


def test_one_long_turn_is_enough():
    s = LanguageSwitcher(["ko", "en"])
    assert s.unserved(_heard("zh", 0.97, 0.01, words=14, secs=UnservedRule().long_secs))


def test_two_different_languages_or_a_served_turn_between_are_not():
    s = LanguageSwitcher(["ko", "en"])
    assert not s.unserved(_heard("ja", 0.97, 0.01))
    assert not s.unserved(_heard("th", 0.97, 0.01))  # Whisper base's guesses for poor Korean wander
    s = LanguageSwitcher(["ko", "en"])
    assert not s.unserved(_heard("ja", 0.97, 0.01))
    assert not s.unserved(_heard("ko", 0.6, 0.6))  # a turn heard in Korean breaks the run
    assert not s.unserved(_heard("ja", 0.97, 0.01))


def test_a_served_language_still_likely_or_a_plain_guess_is_not_evidence():
    s = LanguageSwitcher(["ko", "en"])
    for _ in range(3):
        assert not s.unserved(_heard("ja", 0.97, 0.3))  # Korean not unlikely
    s = LanguageSwitcher(["ko", "en"])
    for _ in range(3):
        assert not s.unserved(_heard("ja", 0.923, 0.015))  # espeak Korean "수도 가로등" over the phone


def test_short_turns_are_not_evidence():
    s = LanguageSwitcher(["ko", "en"])
    for _ in range(3):
        assert not s.unserved(_heard("zh", 0.99, 0.0, words=1, secs=0.8))


def test_the_call_is_told_only_after_the_second_turn():
    config = load_config(overrides=["line.languages=['ko','en']", "stt.language='auto'"])
    assets = DialogAssets.load(config)
    dialog = new_dialog_state(config, assets)
    policy = make_policy(config, assets)

    def turn():  # "워 샹 터우쑤 루덩 화이러": what the STT's LanguageHeardFrame carries, decided by the policy
        policy.language_heard(_heard("ko", 0.01, None, secs=2.6), _heard("zh", 0.97, 0.01, secs=2.6)).apply(dialog, "")

    turn()
    assert dialog.heard_unserved is None
    turn()
    assert dialog.heard_unserved == "zh"


def test_the_rule_is_configured_and_checked():
    import pytest

    from bot.config import ConfigError

    stt = load_config(overrides=["stt.unserved_turns=3", "stt.unserved_p=0.9"]).stt
    assert (stt.unserved_turns, stt.unserved_p, stt.unserved_served_p, stt.unserved_long_secs) == (3, 0.9, 0.1, 8.0)
    with pytest.raises(ConfigError, match="stt.unserved_p"):
        load_config(overrides=["stt.unserved_p=1.5"])
    with pytest.raises(ConfigError, match="stt.unserved_turns"):
        load_config(overrides=["stt.unserved_turns=0"])
