"""Config: typos and wrong types are errors naming the key; --set overrides parse as TOML."""

from pathlib import Path

import pytest

from bot.config import DEFAULT_CONFIG, REQUIRED_KEYS, ConfigError, load_config


def test_shipped_config_loads_with_every_required_key():
    cfg = load_config()
    assert cfg.stt.language == "ko"
    assert cfg.tts.require_provider == "cpu"
    text = DEFAULT_CONFIG.read_text()
    for key in REQUIRED_KEYS:
        assert f"\n{key.split('.')[1]} =" in text


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("stt.beam_sise=5", "stt.beam_sise"),
        ("stt.beam_size='five'", "stt.beam_size: expected int"),
        ("stt.device=gpu", "stt.device: 'gpu' is not one of"),
        ("tts.providers='cpu'", "tts.providers: expected a list"),
        ("twilio.validate_signature=1", "twilio.validate_signature: expected bool"),
        ("nosuch.key=1", "unknown config section [nosuch]"),
        ("stt.model", "expected section.key=value"),
    ],
)
def test_bad_keys_and_types_name_the_key(override, message):
    with pytest.raises(ConfigError, match=None) as err:
        load_config(overrides=[override])
    assert message in str(err.value)


def test_overrides_parse_toml_literals_and_bare_strings():
    cfg = load_config(overrides=["stt.beam_size=5", "llm.model=Qwen/Qwen2.5", "tts.providers=['tensorrt','cpu']",
                                 "latency.stt_ms=300", "stt.temperature=0"])
    assert cfg.stt.beam_size == 5
    assert cfg.llm.model == "Qwen/Qwen2.5"
    assert cfg.tts.providers == ["tensorrt", "cpu"]
    assert cfg.stt.temperature == 0.0 and isinstance(cfg.stt.temperature, float)


def test_missing_required_key_is_named(tmp_path: Path):
    text = DEFAULT_CONFIG.read_text().replace('voice = "F1"\n', "")
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="tts.voice"):
        load_config(path)


def test_relative_paths_resolve_against_the_config_file(tmp_path: Path):
    path = tmp_path / "c.toml"
    path.write_text(DEFAULT_CONFIG.read_text())
    cfg = load_config(path)
    assert cfg.path(cfg.tts.model_dir) == tmp_path / "models/supertonic-3"


def test_run_bot_reports_config_errors_with_the_key(capsys):
    import run_bot

    assert run_bot.main(["chat", "--set", "llm.dialekt=openai"]) == 2
    assert "llm.dialekt" in capsys.readouterr().err
