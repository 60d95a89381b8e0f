"""Issue 47, part 1: every call is told, right after the greeting and in its language, that an AI
answers (the AI Basic Act's advance notice); a line that would not tell it does not start."""

from __future__ import annotations

import re

import pytest

from bot.call.assets import DialogAssets
from bot.call.language import new_dialog_state
from bot.call.wiring import make_policy
from bot.config import ConfigError, ai_words, load_config, tells_ai
from bot.dialog.state import DialogState
from tests.conftest import ROOT

PACKS = ("en", "vi", "ru")


def _line(*extra: str):
    config = load_config(overrides=["line.languages=['ko','en','vi','ru']", "line.language_keys={vi='7',ru='6'}",
                                    *extra])
    return config, DialogAssets.load(config)


@pytest.mark.parametrize("path", ["config.toml", "config.gpu.toml"])
def test_the_shipped_configs_tell_the_caller_an_ai_answers(path):
    config = load_config(ROOT / path)
    assert tells_ai(config.call.ai_notice, ai_words("ko"))


@pytest.mark.parametrize("code", PACKS)
def test_every_language_pack_has_an_ai_notice_in_its_own_words(code):
    config, assets = _line()
    pack = assets.languages[code]
    assert pack.ai_notice and tells_ai(pack.ai_notice, ai_words(code))
    assert not tells_ai(pack.switched, ai_words(code))  # the notice, not another sentence, carries it


def test_the_ai_notice_is_said_right_after_the_greeting_before_the_recording_notice(tmp_path):
    config, assets = _line("recording.enabled=true", f"recording.dir='{tmp_path}'",
                           "call.recording_notice='민원 처리를 위해 통화 내용이 녹음되고 기록됩니다.'")
    notes = make_policy(config, assets).greeting_notes(config.call.recording_notice)
    assert notes[:2] == (config.call.ai_notice, config.call.recording_notice)


def test_a_greeting_that_says_it_needs_no_second_notice():
    config, assets = _line("call.greeting='안녕하세요, 시청 인공지능 민원 안내입니다. 무엇을 도와드릴까요?'", "call.ai_notice=''")
    assert make_policy(config, assets).greeting_notes() == ()


@pytest.mark.parametrize(("key", "code"), [("9", "en"), ("7", "vi"), ("6", "ru")])
def test_a_keypad_switch_says_the_ai_notice_in_the_new_language(key, code):
    config, assets = _line()
    answer = make_policy(config, assets).keypad(key, new_dialog_state(config, assets))
    pack = assets.languages[code]
    assert answer.sentences[:2] == (pack.switched, pack.ai_notice)


def test_a_line_without_the_notice_does_not_start_naming_the_key_and_file():
    bare = ROOT / "config.toml"
    with pytest.raises(ConfigError, match=r"call\.ai_notice.*an AI answers.*bot/data/ai_notice\.toml"):
        load_config(bare, ["call.ai_notice='안내해 드립니다.'"])
    with pytest.raises(ConfigError, match=r"call\.ai_notice"):
        load_config(overrides=["call.ai_notice=''"])


def test_a_language_pack_without_the_notice_is_refused_naming_its_file(tmp_path):
    from bot import languages

    home = tmp_path / "home"
    folder = home / "es"
    folder.mkdir(parents=True)
    en = languages.HOME / "en"
    (folder / "__init__.py").write_text(
        "from bot.languages.en import English\n\n\nclass Spanish(English):\n    code = 'es'\n    label = 'ES'\n"
        "    tag = 'es'\n    names = {'ko': '스페인어', 'en': 'Spanish'}\n\n\nLANGUAGE = Spanish()\n", encoding="utf-8")
    text = (en / "language.toml").read_text(encoding="utf-8")
    text, n = re.subn(r'(?m)^ai_notice = .*$', 'ai_notice = "Hola, en que puedo ayudarle?"', text)
    assert n == 1
    (folder / "language.toml").write_text(text, encoding="utf-8")
    (folder / "shortcuts.toml").write_text((en / "shortcuts.toml").read_text(encoding="utf-8"), encoding="utf-8")
    try:
        with pytest.raises(ConfigError, match=r"es/language\.toml.*language\.ai_notice"):
            load_config(overrides=["line.languages=['ko','es']", f"line.language_dirs=['{home}']"])
    finally:
        languages.remove_home(home)


def test_a_transfer_the_model_chose_says_a_person_is_coming():
    config, assets = _line("call.transfer_number='+8221200000'", "line.hours=['24/7']", "line.breaks=[]")
    policy = make_policy(config, assets)
    turn = {"emergency": "none", "reply": "네, 알겠습니다.", "intent": "transfer", "category": "none",
            "location": None, "time": None, "flow": "continue"}
    follow = policy.after_model(turn, DialogState())
    assert follow.change.transfer and follow.sentences == (assets.canned.person_coming,)
    en = policy.for_language("en").after_model(turn, DialogState(language="en"))
    assert en.sentences == (assets.languages["en"].canned.person_coming,)
    assert "person" in assets.languages["en"].canned.person_coming


def test_a_config_file_without_the_notice_names_its_line(tmp_path):
    text = (ROOT / "config.toml").read_text(encoding="utf-8")
    start = text.index("\nai_notice = ") + 1
    text = text[:start] + 'ai_notice = "무엇이든 물어보세요."' + text[text.index("\n", start):]
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    line = text[:start].count("\n") + 1
    with pytest.raises(ConfigError, match=rf"config\.toml:{line}: call\.ai_notice"):
        load_config(path)


def test_the_greeting_record_notes_the_notice_was_said():
    from bot.telemetry.latency import TurnRecord

    assert TurnRecord(call_id="c", index=0, route="greeting").to_dict()["ai_notice"] is False
