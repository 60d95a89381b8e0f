"""Table-driven tests for the Korean TTS text normalizer."""

import pytest

from bot.korean.normalize import normalize_korean, remove_unsupported

CASES = [
    # Native numbers before native counters.
    ("3시", "세 시"),
    ("12시", "열두 시"),
    ("2개", "두 개"),
    ("1권", "한 권"),
    ("20명", "스무 명"),
    ("21명", "스물한 명"),
    ("99명", "아흔아홉 명"),
    ("20살", "스무 살"),
    ("24시간", "스물네 시간"),
    ("3달", "세 달"),
    ("1번째", "첫 번째"),
    ("2번째", "두 번째"),
    ("1~2시간", "한 시간에서 두 시간"),
    ("100개", "백 개"),
    ("5,000원짜리 2개", "오천 원짜리 두 개"),
    # Sino numbers before Sino counters; 월 is fused.
    ("3월", "삼월"),
    ("6월", "유월"),
    ("10월", "시월"),
    ("12월", "십이월"),
    ("15일", "십오 일"),
    ("3번 버스", "삼 번 버스"),
    ("3개월", "삼 개월"),
    ("3개국", "삼 개국"),
    ("30대 여성", "삼십 대 여성"),
    ("3달러", "삼 달러"),
    ("제3장", "제삼 장"),
    ("2박 3일", "이 박 삼 일"),
    # Plain Sino reading.
    ("0", "영"),
    ("10", "십"),
    ("100", "백"),
    ("1000", "천"),
    ("10000", "만"),
    ("123,456", "십이만 삼천사백오십육"),
    ("99,999,999", "구천구백구십구만 구천구백구십구"),
    ("100000000", "일억"),
    ("1조", "일조"),
    ("120", "백이십"),
    ("007", "공공칠"),
    # Dates.
    ("2026년 12월 3일", "이천이십육 년 십이월 삼 일"),
    ("2026-12-03", "이천이십육 년 십이월 삼 일"),
    ("2026.12.3", "이천이십육 년 십이월 삼 일"),
    ("2026/06/10", "이천이십육 년 유월 십 일"),
    ("예약은 3/5(목) 가능", "예약은 삼월 오 일(목) 가능"),
    # Times.
    ("오후 2시 30분", "오후 두 시 삼십 분"),
    ("14:30", "열네 시 삼십 분"),
    ("12:00", "열두 시"),
    ("9시 반", "아홉 시 반"),
    ("오전 9시부터 오후 6시까지 영업합니다!", "오전 아홉 시부터 오후 여섯 시까지 영업합니다!"),
    ("9:00~18:00", "아홉 시에서 열여덟 시"),
    # Money.
    ("15,000원", "만 오천 원"),
    ("가격은 15,000원입니다.", "가격은 만 오천 원입니다."),
    ("3만 원", "삼만 원"),
    ("1만 원", "만 원"),
    ("1억 2천만 원", "일억 이천만 원"),
    ("2,000만 원", "이천만 원"),
    ("1,000,000원", "백만 원"),
    ("$10", "십 달러"),
    ("50,000원~100,000원", "오만 원에서 십만 원"),
    # Phone numbers: digit by digit, 공 for 0, groups spaced.
    ("010-1234-5678", "공일공 일이삼사 오육칠팔"),
    ("02-123-4567", "공이 일이삼 사오육칠"),
    ("1588-1234", "일오팔팔 일이삼사"),
    ("01012345678", "공일공 일이삼사 오육칠팔"),
    ("문의는 02-123-4567로 주세요.", "문의는 공이 일이삼 사오육칠로 주세요."),
    # Decimals and percent.
    ("3.5", "삼 점 오"),
    ("3.05", "삼 점 영오"),
    ("0.25%", "영 점 이오 퍼센트"),
    ("50%", "오십 퍼센트"),
    ("1.5배", "일 점 오 배"),
    # Units, only after a number.
    ("3km", "삼 킬로미터"),
    ("5 m", "오 미터"),
    ("2kg", "이 킬로그램"),
    ("500g", "오백 그램"),
    ("30cm", "삼십 센티미터"),
    ("10mm", "십 밀리미터"),
    ("84㎡", "팔십사 제곱미터"),
    ("84m2", "팔십사 제곱미터"),
    ("84m²", "팔십사 제곱미터"),
    ("25°C", "이십오 도"),
    ("25℃", "이십오 도"),
    ("-5℃", "마이너스 오 도"),
    ("2L", "이 리터"),
    ("3.5kg", "삼 점 오 킬로그램"),
    # Latin letters: words, then letter names.
    ("ARS", "에이알에스"),
    ("KT에서 문자", "케이티에서 문자"),
    ("QR 코드", "큐알 코드"),
    ("PDF 파일", "피디에프 파일"),
    ("ID", "아이디"),
    ("OK", "오케이"),
    ("app", "앱"),
    ("Wi-Fi 비밀번호", "와이파이 비밀번호"),
    ("5G", "파이브지"),
    ("xyz", "엑스와이제트"),
    ("m", "엠"),
    # Symbols and ranges.
    ("A&B", "에이 앤 비"),
    ("1+1", "일 플러스 일"),
    ("3~5일", "삼 일에서 오 일"),
    ("3-4명", "세 명에서 네 명"),
    ("9시~18시", "아홉 시에서 열여덟 시"),
    ("3/4", "사 분의 삼"),
    ("월·수·금", "월 수 금"),
    ("예약/취소", "예약 취소"),
    ("좋아요~!", "좋아요!"),
    ("**중요** 안내", "중요 안내"),
    # Whitespace and untouched text.
    ("  줄\n바꿈\t탭 ", "줄 바꿈 탭"),
    ("안녕하세요. 무엇을 도와드릴까요?", "안녕하세요. 무엇을 도와드릴까요?"),
    ("네, 알겠습니다!", "네, 알겠습니다!"),
    ("", ""),
]


@pytest.mark.parametrize(("text", "spoken"), CASES)
def test_normalize_korean(text, spoken):
    assert normalize_korean(text) == spoken


@pytest.mark.parametrize("text", [text for text, _ in CASES])
def test_normalize_is_idempotent(text):
    once = normalize_korean(text)
    assert normalize_korean(once) == once


@pytest.mark.parametrize("text", [text for text, _ in CASES])
def test_output_has_no_digits_or_latin(text):
    spoken = normalize_korean(text)
    assert not any(ch.isascii() and ch.isalnum() for ch in spoken), spoken


HANGUL_AND_PUNCT = lambda ch: "가" <= ch <= "힣" or ch in " .,?!"  # noqa: E731

REMOVE_CASES = [
    ("안녕하세요.", "안녕하세요.", []),
    ("문의: 공이 (평일)", "문의 공이 평일", [":", "(", ")"]),
    ("좋아요 ♥ ♥!", "좋아요!", ["♥"]),
    ("a♥b", "", ["a", "♥", "b"]),
    ("", "", []),
]


@pytest.mark.parametrize(("text", "cleaned", "removed"), REMOVE_CASES)
def test_remove_unsupported(text, cleaned, removed):
    assert remove_unsupported(text, HANGUL_AND_PUNCT) == (cleaned, removed)
