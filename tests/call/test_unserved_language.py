"""A caller in a language the line does not serve (issue 38): told once, in Korean and English,
where to call (1345); a line that lists a language its voice cannot speak is refused."""

import io
import json

import pytest

from bot.call.assets import DialogAssets
from bot.call.wiring import make_policy
from bot.config import ConfigError, load_config
from bot.dialog.language_packs import unserved_notice
from bot.dialog.policy import Speak
from bot.dialog.state import DialogState
from bot.languages import untag
from bot.tools.chat import run_chat
from tests.conftest import ROOT


def test_the_notice_names_the_line_languages_in_korean_then_english():
    ko, en = unserved_notice(["ko", "en"])
    assert ko.startswith("이 전화는 한국어, 영어로 안내해 드립니다.") and "일삼사오" in ko
    lang, text = untag(en)
    assert lang == "en" and text.startswith("This line serves Korean and English.") and "one three four five" in text


def test_a_caller_heard_in_chinese_hears_the_notice_once():
    config = load_config()
    assets = DialogAssets.load(config)
    policy = make_policy(config, assets)
    state = DialogState()
    state.heard_unserved = "zh"
    told = policy.decide("我想投诉路灯坏了", state)
    assert isinstance(told, Speak) and told.rule == "unserved:zh" and told.sentences == assets.unserved
    told.change.apply(state, told.reply)
    assert state.unserved_told and state.heard_unserved is None
    state.heard_unserved = "zh"  # heard again: not told twice
    again = policy.decide("我想投诉路灯坏了", state)
    assert not (isinstance(again, Speak) and again.rule == "unserved:zh")


def test_an_emergency_still_comes_first():
    config = load_config()
    policy = make_policy(config, DialogAssets.load(config))
    state = DialogState()
    state.heard_unserved = "zh"
    assert policy.decide("불이 났어요", state).escalation == "119"


@pytest.mark.parametrize("code", ["zh", "th"])
def test_a_line_language_the_voice_cannot_speak_is_refused_naming_it(code):
    with pytest.raises(ConfigError, match=f"line.languages: '{code}' cannot be spoken"):
        load_config(overrides=[f"line.languages=['ko','{code}']"])


async def test_chat_in_another_language_is_answered_in_it(tmp_path):
    config = load_config(overrides=[f"records.url='sqlite:///{tmp_path / 'calls.db'}'", "line.languages=['ko','en']",
                                    "llm.start_without_llm=true", "llm.base_url='http://127.0.0.1:9/v1'"])
    out = io.StringIO()
    assert await run_chat(config, io.StringIO("thank you, goodbye\n"), out, language="en") == 0
    turn = json.loads(out.getvalue().splitlines()[0])
    assert turn["language"] == "en" and turn["route"] == "shortcut" and turn["llm_calls"] == 0


def test_the_referral_number_is_data(tmp_path):
    text = (ROOT / "bot/data/unserved.toml").read_text(encoding="utf-8")
    danuri = tmp_path / "unserved.toml"
    danuri.write_text(text.replace('number = "1345"', 'number = "15771366"'), encoding="utf-8")
    ko, en = unserved_notice(["ko", "en"], danuri)
    assert "일오칠칠일삼육육" in ko and "one five seven seven one three six six" in untag(en)[1]
    danuri.write_text(text.replace('number = "1345"', 'number = "1345-1"'), encoding="utf-8")
    with pytest.raises(ValueError, match=r"unserved\.toml:\d+: number"):
        unserved_notice(["ko", "en"], danuri)
