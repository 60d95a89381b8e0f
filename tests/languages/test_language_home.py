"""Adding a language is one folder and one config line (issue 39): a throwaway language, written into
a temporary folder outside the checkout, holds a call; a folder never silently replaces a language."""

from __future__ import annotations

import shutil

import pytest

from bot import languages
from bot.call.assets import DialogAssets
from bot.config import ConfigError, load_config
from bot.dialog.language_packs import LanguageError
from bot.testing.fake_llm import FakeLLM
from bot.tools.chat import DialogSession

SPANISH = '''"""A throwaway Spanish for the test: the calendar phrases are English's, the digits its own."""

from bot.languages.en import English

DIGITS = ("cero", "uno", "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve")


class Spanish(English):
    code = "es"
    name = "Espanol"
    label = "ES"
    names = {"ko": "스페인어", "en": "Spanish"}
    tag = "es"
    say_voice = "es-ES"

    def read_digits(self, number: str) -> str:
        return ", ".join(DIGITS[int(d)] for d in number if d.isdigit())


LANGUAGE = Spanish()
'''
SWITCHED = "Claro, seguimos en espanol. En que puedo ayudarle?"
HELLO = "Hola, esta es la linea de informacion de la ciudad. En que puedo ayudarle?"
AI_NOTICE = "This call is answered by an artificial intelligence, not a person."  # English's, copied
INSTRUCTION = "The caller speaks Spanish: write `reply` in Spanish."


def _spanish_folder(home):
    """es/ beside nothing else: English's data files with the sentences this test listens for."""
    en = languages.HOME / "en"
    folder = home / "es"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(SPANISH, encoding="utf-8")
    text = (en / "language.toml").read_text(encoding="utf-8")
    for key, value in (("switched", SWITCHED), ("instruction", INSTRUCTION), ("menu", "Para espanol, marque {key}.")):
        start = text.index(f"\n{key} = ") + 1
        text = text[:start] + f'{key} = "{value}"' + text[text.index("\n", start):]
    (folder / "language.toml").write_text(text, encoding="utf-8")
    rules = (en / "shortcuts.toml").read_text(encoding="utf-8")
    rules = rules.replace("'(?:hi|hello|hey|goodmorning|goodafternoon|goodevening)+(?:there)?'", "'(?:hola|buenosdias)+'")
    rules = rules.replace('reply = "Hello, this is the city\'s information line. How can I help you?"', f'reply = "{HELLO}"')
    assert "hola" in rules and HELLO in rules
    (folder / "shortcuts.toml").write_text(rules, encoding="utf-8")
    return folder


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "city-languages"
    _spanish_folder(home)
    yield home
    languages.remove_home(home)


@pytest.fixture(scope="module")
def fake():
    with FakeLLM(first_token_delay=0.02, token_delay=0.002) as server:
        yield server


def _config(fake, home, *extra):
    return load_config(overrides=[
        f"llm.base_url='{fake.base_url}'", "line.languages=['ko','es']", "line.language_key='8'",
        'line.hours=["24/7"]', "line.breaks=[]", *extra])


async def test_a_language_from_a_folder_outside_the_checkout_holds_a_call(fake, home):
    fake.reset()
    config = _config(fake, home, f"line.language_dirs=['{home}']")
    assert languages.get("es").name == "Espanol" and "es" in languages.known()
    async with DialogSession(config) as call:
        switched = await call.keys("8")  # the keypad menu line the folder gave
        assert switched.reply == f"{SWITCHED} {AI_NOTICE}" and switched.record.llm_calls == 0  # issue 47
        hello = await call.turn("hola")  # its own shortcut rules: no model call
        assert hello.reply == HELLO and hello.record.llm_calls == 0
        fake.script(reply_json={"emergency": "none", "reply": "Entendido. Donde esta la farola?",
                                "intent": "report_problem", "category": "street_lights", "location": None,
                                "time": None, "flow": "continue"})
        answered = await call.turn("la farola de mi calle no funciona")
        assert answered.reply == "Entendido. Donde esta la farola?" and answered.record.llm_calls == 1
        system = fake.requests[-1]["messages"][0]["content"]
        assert INSTRUCTION in system  # the model was asked for the folder's language
        assert answered.record.language == "es"
    # The menu line is the folder's, said after the Korean greeting.
    assets = DialogAssets.load(config)
    assert assets.menu_lines["es"] == "Para espanol, marque 8."
    assert languages.get("es").read_digits("2026-0042") == "dos, cero, dos, seis, cero, cero, cuatro, dos"


def test_without_its_folder_the_line_stops_naming_it(fake, home):
    config = _config(fake, home)  # no line.language_dirs
    with pytest.raises(LanguageError, match=r"'es': no language folder bot/languages/es/ \(known"):
        DialogAssets.load(config)


def test_a_folder_that_would_replace_a_language_is_refused(fake, home):
    shutil.copytree(languages.HOME / "en", home / "en")
    with pytest.raises(ConfigError, match=r"line.language_dirs: .*en/ would replace .*bot/languages/en/"):
        _config(fake, home, f"line.language_dirs=['{home}']")
    assert languages.get("en").folder == languages.HOME / "en"


def test_a_missing_folder_is_named(fake, home):
    with pytest.raises(ConfigError, match=r"line.language_dirs: .*nowhere is not a folder"):
        _config(fake, home, f"line.language_dirs=['{home / 'nowhere'}']")
