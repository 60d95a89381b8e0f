"""Phone numbers and resident registration numbers never reach the logs."""

import pytest
from loguru import logger

from bot.privacy import install_log_masking, mask


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        ("caller +821012345678 connected", "12345678"),
        ("번호는 010-1234-5678 입니다", "1234-5678"),
        ("번호는 01012345678 입니다", "12345678"),
        ("주민번호 900101-1234567", "1234567"),
        ("주민번호 9001011234567", "1234567"),
        ("call CA0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"),
    ],
)
def test_mask_hides_personal_numbers(text, hidden):
    out = mask(text)
    assert hidden not in out
    assert "*" in out or "…" in out


def test_mask_leaves_ordinary_numbers():
    assert mask("오후 2시 30분, 15,000원, 120 콜센터") == "오후 2시 30분, 15,000원, 120 콜센터"


def test_loguru_records_are_masked():
    lines = []
    install_log_masking()
    sink = logger.add(lines.append, format="{message}")
    try:
        logger.info("From {}", "+821099998888")
    finally:
        logger.remove(sink)
    assert "99998888" not in "".join(lines)
