"""The counter table (bot/data/counters.toml): every counter read with 1, 2, 3, 4, 10, 20, 21 and a
number over 99, the context rules of 분 and 번, the mixed hundreds, clock hours, months and weekdays.

The expected readings are written out by hand from the grammar (see the references in counters.toml),
never computed with the normalizer's own code.
"""

import re
from pathlib import Path

import pytest

from bot.languages.ko.normalize import COUNTERS_FILE, load_counters, normalize_korean

NUMBERS = (1, 2, 3, 4, 10, 20, 21)

# counter | reading of 1 | 2 | 3 | 4 | 10 | 20 | 21 | N (over 99) and its reading. Written "{n}{counter}".
NATIVE_TABLE = """
개    | 한 개 | 두 개 | 세 개 | 네 개 | 열 개 | 스무 개 | 스물한 개 | 101 백한 개
명    | 한 명 | 두 명 | 세 명 | 네 명 | 열 명 | 스무 명 | 스물한 명 | 150 백오십 명
사람   | 한 사람 | 두 사람 | 세 사람 | 네 사람 | 열 사람 | 스무 사람 | 스물한 사람 | 120 백이십 사람
마리   | 한 마리 | 두 마리 | 세 마리 | 네 마리 | 열 마리 | 스무 마리 | 스물한 마리 | 102 백두 마리
장    | 한 장 | 두 장 | 세 장 | 네 장 | 열 장 | 스무 장 | 스물한 장 | 200 이백 장
권    | 한 권 | 두 권 | 세 권 | 네 권 | 열 권 | 스무 권 | 스물한 권 | 103 백세 권
대    | 한 대 | 두 대 | 세 대 | 네 대 | 십 대 | 이십 대 | 스물한 대 | 110 백십 대
살    | 한 살 | 두 살 | 세 살 | 네 살 | 열 살 | 스무 살 | 스물한 살 | 100 백 살
시    | 한 시 | 두 시 | 세 시 | 네 시 | 열 시 | 스무 시 | 스물한 시 | 100 백 시
시간   | 한 시간 | 두 시간 | 세 시간 | 네 시간 | 열 시간 | 스무 시간 | 스물한 시간 | 104 백네 시간
번째   | 첫 번째 | 두 번째 | 세 번째 | 네 번째 | 열 번째 | 스무 번째 | 스물한 번째 | 101 백한 번째
잔    | 한 잔 | 두 잔 | 세 잔 | 네 잔 | 열 잔 | 스무 잔 | 스물한 잔 | 105 백다섯 잔
병    | 한 병 | 두 병 | 세 병 | 네 병 | 열 병 | 스무 병 | 스물한 병 | 111 백십일 병
켤레   | 한 켤레 | 두 켤레 | 세 켤레 | 네 켤레 | 열 켤레 | 스무 켤레 | 스물한 켤레 | 106 백여섯 켤레
그루   | 한 그루 | 두 그루 | 세 그루 | 네 그루 | 열 그루 | 스무 그루 | 스물한 그루 | 1000 천 그루
채    | 한 채 | 두 채 | 세 채 | 네 채 | 열 채 | 스무 채 | 스물한 채 | 107 백일곱 채
척    | 한 척 | 두 척 | 세 척 | 네 척 | 열 척 | 스무 척 | 스물한 척 | 108 백여덟 척
통    | 한 통 | 두 통 | 세 통 | 네 통 | 열 통 | 스무 통 | 스물한 통 | 120 백이십 통
벌    | 한 벌 | 두 벌 | 세 벌 | 네 벌 | 열 벌 | 스무 벌 | 스물한 벌 | 109 백아홉 벌
송이   | 한 송이 | 두 송이 | 세 송이 | 네 송이 | 열 송이 | 스무 송이 | 스물한 송이 | 1001 천한 송이
자루   | 한 자루 | 두 자루 | 세 자루 | 네 자루 | 열 자루 | 스무 자루 | 스물한 자루 | 130 백삼십 자루
군데   | 한 군데 | 두 군데 | 세 군데 | 네 군데 | 열 군데 | 스무 군데 | 스물한 군데 | 101 백한 군데
곳    | 한 곳 | 두 곳 | 세 곳 | 네 곳 | 열 곳 | 스무 곳 | 스물한 곳 | 102 백두 곳
가지   | 한 가지 | 두 가지 | 세 가지 | 네 가지 | 열 가지 | 스무 가지 | 스물한 가지 | 365 삼백육십오 가지
달    | 한 달 | 두 달 | 세 달 | 네 달 | 열 달 | 스무 달 | 스물한 달 | 101 백한 달
줄    | 한 줄 | 두 줄 | 세 줄 | 네 줄 | 열 줄 | 스무 줄 | 스물한 줄 | 203 이백세 줄
칸    | 한 칸 | 두 칸 | 세 칸 | 네 칸 | 열 칸 | 스무 칸 | 스물한 칸 | 150 백오십 칸
그릇   | 한 그릇 | 두 그릇 | 세 그릇 | 네 그릇 | 열 그릇 | 스무 그릇 | 스물한 그릇 | 101 백한 그릇
접시   | 한 접시 | 두 접시 | 세 접시 | 네 접시 | 열 접시 | 스무 접시 | 스물한 접시 | 100 백 접시
봉지   | 한 봉지 | 두 봉지 | 세 봉지 | 네 봉지 | 열 봉지 | 스무 봉지 | 스물한 봉지 | 102 백두 봉지
상자   | 한 상자 | 두 상자 | 세 상자 | 네 상자 | 열 상자 | 스무 상자 | 스물한 상자 | 500 오백 상자
포기   | 한 포기 | 두 포기 | 세 포기 | 네 포기 | 열 포기 | 스무 포기 | 스물한 포기 | 1002 천두 포기
바퀴   | 한 바퀴 | 두 바퀴 | 세 바퀴 | 네 바퀴 | 열 바퀴 | 스무 바퀴 | 스물한 바퀴 | 101 백한 바퀴
알    | 한 알 | 두 알 | 세 알 | 네 알 | 열 알 | 스무 알 | 스물한 알 | 10001 만 한 알
끼    | 한 끼 | 두 끼 | 세 끼 | 네 끼 | 열 끼 | 스무 끼 | 스물한 끼 | 103 백세 끼
차례   | 한 차례 | 두 차례 | 세 차례 | 네 차례 | 열 차례 | 스무 차례 | 스물한 차례 | 101 백한 차례
배    | 한 배 | 두 배 | 세 배 | 네 배 | 열 배 | 스무 배 | 스물한 배 | 100 백 배
자리   | 한 자리 | 두 자리 | 세 자리 | 네 자리 | 열 자리 | 스무 자리 | 스물한 자리 | 102 백두 자리
부    | 한 부 | 두 부 | 세 부 | 네 부 | 열 부 | 스무 부 | 스물한 부 | 101 백한 부
"""
# 분 and 번 bare are their Sino senses (minutes, a number); their native senses are in CONTEXT_TABLE.
SINO_TABLE = """
분    | 일 분 | 이 분 | 삼 분 | 사 분 | 십 분 | 이십 분 | 이십일 분 | 120 백이십 분
초    | 일 초 | 이 초 | 삼 초 | 사 초 | 십 초 | 이십 초 | 이십일 초 | 100 백 초
일    | 일 일 | 이 일 | 삼 일 | 사 일 | 십 일 | 이십 일 | 이십일 일 | 365 삼백육십오 일
월    | 일월 | 이월 | 삼월 | 사월 | 시월 | 이십월 | 이십일월 | 100 백월
년    | 일 년 | 이 년 | 삼 년 | 사 년 | 십 년 | 이십 년 | 이십일 년 | 2026 이천이십육 년
개월   | 일 개월 | 이 개월 | 삼 개월 | 사 개월 | 십 개월 | 이십 개월 | 이십일 개월 | 120 백이십 개월
주    | 일 주 | 이 주 | 삼 주 | 사 주 | 십 주 | 이십 주 | 이십일 주 | 104 백사 주
주일   | 일 주일 | 이 주일 | 삼 주일 | 사 주일 | 십 주일 | 이십 주일 | 이십일 주일 | 101 백일 주일
주년   | 일 주년 | 이 주년 | 삼 주년 | 사 주년 | 십 주년 | 이십 주년 | 이십일 주년 | 100 백 주년
개년   | 일 개년 | 이 개년 | 삼 개년 | 사 개년 | 십 개년 | 이십 개년 | 이십일 개년 | 101 백일 개년
개국   | 일 개국 | 이 개국 | 삼 개국 | 사 개국 | 십 개국 | 이십 개국 | 이십일 개국 | 101 백일 개국
년생   | 일 년생 | 이 년생 | 삼 년생 | 사 년생 | 십 년생 | 이십 년생 | 이십일 년생 | 2000 이천 년생
교시   | 일 교시 | 이 교시 | 삼 교시 | 사 교시 | 십 교시 | 이십 교시 | 이십일 교시 | 101 백일 교시
분기   | 일 분기 | 이 분기 | 삼 분기 | 사 분기 | 십 분기 | 이십 분기 | 이십일 분기 | 101 백일 분기
박    | 일 박 | 이 박 | 삼 박 | 사 박 | 십 박 | 이십 박 | 이십일 박 | 101 백일 박
원    | 일 원 | 이 원 | 삼 원 | 사 원 | 십 원 | 이십 원 | 이십일 원 | 15000 만 오천 원
달러   | 일 달러 | 이 달러 | 삼 달러 | 사 달러 | 십 달러 | 이십 달러 | 이십일 달러 | 100 백 달러
유로   | 일 유로 | 이 유로 | 삼 유로 | 사 유로 | 십 유로 | 이십 유로 | 이십일 유로 | 250 이백오십 유로
엔    | 일 엔 | 이 엔 | 삼 엔 | 사 엔 | 십 엔 | 이십 엔 | 이십일 엔 | 1000 천 엔
파운드  | 일 파운드 | 이 파운드 | 삼 파운드 | 사 파운드 | 십 파운드 | 이십 파운드 | 이십일 파운드 | 101 백일 파운드
위안   | 일 위안 | 이 위안 | 삼 위안 | 사 위안 | 십 위안 | 이십 위안 | 이십일 위안 | 300 삼백 위안
층    | 일 층 | 이 층 | 삼 층 | 사 층 | 십 층 | 이십 층 | 이십일 층 | 101 백일 층
호    | 일 호 | 이 호 | 삼 호 | 사 호 | 십 호 | 이십 호 | 이십일 호 | 1203 천이백삼 호
호선   | 일 호선 | 이 호선 | 삼 호선 | 사 호선 | 십 호선 | 이십 호선 | 이십일 호선 | 101 백일 호선
번    | 일 번 | 이 번 | 삼 번 | 사 번 | 십 번 | 이십 번 | 이십일 번 | 101 백일 번
번지   | 일 번지 | 이 번지 | 삼 번지 | 사 번지 | 십 번지 | 이십 번지 | 이십일 번지 | 123 백이십삼 번지
동    | 일 동 | 이 동 | 삼 동 | 사 동 | 십 동 | 이십 동 | 이십일 동 | 101 백일 동
반    | 일 반 | 이 반 | 삼 반 | 사 반 | 십 반 | 이십 반 | 이십일 반 | 101 백일 반
학년   | 일 학년 | 이 학년 | 삼 학년 | 사 학년 | 십 학년 | 이십 학년 | 이십일 학년 | 101 백일 학년
항    | 일 항 | 이 항 | 삼 항 | 사 항 | 십 항 | 이십 항 | 이십일 항 | 101 백일 항
쪽    | 일 쪽 | 이 쪽 | 삼 쪽 | 사 쪽 | 십 쪽 | 이십 쪽 | 이십일 쪽 | 350 삼백오십 쪽
페이지  | 일 페이지 | 이 페이지 | 삼 페이지 | 사 페이지 | 십 페이지 | 이십 페이지 | 이십일 페이지 | 101 백일 페이지
세    | 일 세 | 이 세 | 삼 세 | 사 세 | 십 세 | 이십 세 | 이십일 세 | 100 백 세
회    | 일 회 | 이 회 | 삼 회 | 사 회 | 십 회 | 이십 회 | 이십일 회 | 101 백일 회
건    | 일 건 | 이 건 | 삼 건 | 사 건 | 십 건 | 이십 건 | 이십일 건 | 1234 천이백삼십사 건
차    | 일 차 | 이 차 | 삼 차 | 사 차 | 십 차 | 이십 차 | 이십일 차 | 101 백일 차
인    | 일 인 | 이 인 | 삼 인 | 사 인 | 십 인 | 이십 인 | 이십일 인 | 101 백일 인
인분   | 일 인분 | 이 인분 | 삼 인분 | 사 인분 | 십 인분 | 이십 인분 | 이십일 인분 | 101 백일 인분
단계   | 일 단계 | 이 단계 | 삼 단계 | 사 단계 | 십 단계 | 이십 단계 | 이십일 단계 | 101 백일 단계
등    | 일 등 | 이 등 | 삼 등 | 사 등 | 십 등 | 이십 등 | 이십일 등 | 101 백일 등
위    | 일 위 | 이 위 | 삼 위 | 사 위 | 십 위 | 이십 위 | 이십일 위 | 101 백일 위
도    | 일 도 | 이 도 | 삼 도 | 사 도 | 십 도 | 이십 도 | 이십일 도 | 180 백팔십 도
점    | 일 점 | 이 점 | 삼 점 | 사 점 | 십 점 | 이십 점 | 이십일 점 | 100 백 점
평    | 일 평 | 이 평 | 삼 평 | 사 평 | 십 평 | 이십 평 | 이십일 평 | 101 백일 평
톤    | 일 톤 | 이 톤 | 삼 톤 | 사 톤 | 십 톤 | 이십 톤 | 이십일 톤 | 101 백일 톤
퍼센트  | 일 퍼센트 | 이 퍼센트 | 삼 퍼센트 | 사 퍼센트 | 십 퍼센트 | 이십 퍼센트 | 이십일 퍼센트 | 100 백 퍼센트
킬로미터 | 일 킬로미터 | 이 킬로미터 | 삼 킬로미터 | 사 킬로미터 | 십 킬로미터 | 이십 킬로미터 | 이십일 킬로미터 | 101 백일 킬로미터
미터   | 일 미터 | 이 미터 | 삼 미터 | 사 미터 | 십 미터 | 이십 미터 | 이십일 미터 | 100 백 미터
킬로그램 | 일 킬로그램 | 이 킬로그램 | 삼 킬로그램 | 사 킬로그램 | 십 킬로그램 | 이십 킬로그램 | 이십일 킬로그램 | 101 백일 킬로그램
부제   | 일 부제 | 이 부제 | 삼 부제 | 사 부제 | 십 부제 | 이십 부제 | 이십일 부제 | 100 백 부제
부작   | 일 부작 | 이 부작 | 삼 부작 | 사 부작 | 십 부작 | 이십 부작 | 이십일 부작 | 100 백 부작
"""


def parse_table(text: str) -> list[tuple[str, str, str]]:
    """(counter, written, spoken) rows of a counter table."""
    rows = []
    for line in text.strip().splitlines():
        counter, *cells = (cell.strip() for cell in line.split("|"))
        *small, big = cells
        assert len(small) == len(NUMBERS), line
        number, spoken = big.split(" ", 1)
        rows += [(counter, f"{n}{counter}", s) for n, s in zip(NUMBERS, small)]
        rows.append((counter, f"{number}{counter}", spoken))
    return rows


NATIVE_ROWS = parse_table(NATIVE_TABLE)
SINO_ROWS = parse_table(SINO_TABLE)
COUNTER_ROWS = NATIVE_ROWS + SINO_ROWS


def test_every_counter_in_the_data_file_has_a_row():
    table = load_counters()
    assert {c for c, _, _ in NATIVE_ROWS} == set(table.counters("native"))
    assert {c for c, _, _ in SINO_ROWS} == set(table.counters("sino"))
    assert len(COUNTER_ROWS) == 8 * len(table.systems)


@pytest.mark.parametrize(("counter", "text", "spoken"), COUNTER_ROWS)
def test_counter(counter, text, spoken):
    assert normalize_korean(text) == spoken


# Unit symbols next to their Hangul counters (퍼센트, 킬로미터, 미터, 킬로그램).
UNIT_TABLE = """
%    | 일 퍼센트 | 이 퍼센트 | 삼 퍼센트 | 사 퍼센트 | 십 퍼센트 | 이십 퍼센트 | 이십일 퍼센트 | 150 백오십 퍼센트
km   | 일 킬로미터 | 이 킬로미터 | 삼 킬로미터 | 사 킬로미터 | 십 킬로미터 | 이십 킬로미터 | 이십일 킬로미터 | 101 백일 킬로미터
m    | 일 미터 | 이 미터 | 삼 미터 | 사 미터 | 십 미터 | 이십 미터 | 이십일 미터 | 100 백 미터
kg   | 일 킬로그램 | 이 킬로그램 | 삼 킬로그램 | 사 킬로그램 | 십 킬로그램 | 이십 킬로그램 | 이십일 킬로그램 | 120 백이십 킬로그램
"""


@pytest.mark.parametrize(("unit", "text", "spoken"), parse_table(UNIT_TABLE))
def test_unit_symbol(unit, text, spoken):
    assert normalize_korean(text) == spoken


# The native senses of 분 (an honoured person) and 번 (times), each with the eight numbers.
CONTEXT_TABLE = [
    ("손님 {}분", ["손님 한 분", "손님 두 분", "손님 세 분", "손님 네 분", "손님 열 분", "손님 스무 분",
                 "손님 스물한 분", "손님 백한 분"]),
    ("{}분께서 오셨습니다", ["한 분께서 오셨습니다", "두 분께서 오셨습니다", "세 분께서 오셨습니다",
                       "네 분께서 오셨습니다", "열 분께서 오셨습니다", "스무 분께서 오셨습니다",
                       "스물한 분께서 오셨습니다", "백두 분께서 오셨습니다"]),
    ("{}번 더", ["한 번 더", "두 번 더", "세 번 더", "네 번 더", "열 번 더", "스무 번 더", "스물한 번 더",
               "백한 번 더"]),
    ("하루 {}번", ["하루 한 번", "하루 두 번", "하루 세 번", "하루 네 번", "하루 열 번", "하루 스무 번",
                 "하루 스물한 번", "하루 백 번"]),
]
CONTEXT_BIG = {"손님 {}분": 101, "{}분께서 오셨습니다": 102, "{}번 더": 101, "하루 {}번": 100}
CONTEXT_ROWS = [
    (frame.format(n), spoken)
    for frame, spokens in CONTEXT_TABLE
    for n, spoken in zip((*NUMBERS, CONTEXT_BIG[frame]), spokens, strict=True)
]

# Each context rule once, and the cases that must keep the usual sense.
CONTEXT_CASES = [
    # 분: minutes unless a person
    ("3분 후에 다시 걸어 주세요", "삼 분 후에 다시 걸어 주세요"),
    ("5분 정도 걸립니다", "오 분 정도 걸립니다"),
    ("1시간 30분", "한 시간 삼십 분"),
    ("3시 10분께 도착합니다", "세 시 십 분께 도착합니다"),
    ("오후 2:30께", "오후 두 시 삼십 분께"),
    ("어르신 2분이 오셨어요", "어르신 두 분이 오셨어요"),
    ("2분이서 오셨네요", "두 분이서 오셨네요"),
    ("3분께 안내해 드렸습니다", "세 분께 안내해 드렸습니다"),
    ("3분이 오셨어요", "세 분이 오셨어요"),
    ("2분이세요?", "두 분이세요?"),
    ("4분들 모두", "네 분들 모두"),
    ("보호자 1분만 오시면 됩니다", "보호자 한 분만 오시면 됩니다"),
    ("주민 3분", "주민 삼 분"),  # 주민 is not in the list: minutes, as written
    # 번: a number unless times
    ("1번 출구", "일 번 출구"),
    ("3번 버스", "삼 번 버스"),
    ("1번을 누르세요", "일 번을 누르세요"),
    ("1번이나 2번을 눌러 주세요", "일 번이나 이 번을 눌러 주세요"),
    ("번호 3번", "번호 삼 번"),
    ("3번 정도 전화했어요", "세 번 정도 전화했어요"),
    ("2번 이상 틀리면", "두 번 이상 틀리면"),
    ("1번만 더 말씀해 주세요", "한 번만 더 말씀해 주세요"),
    ("3번 만에 연결됐어요", "세 번 만에 연결됐어요"),
    ("하루에 2번씩", "하루에 두 번씩"),
    ("1일 3번 복용", "일 일 세 번 복용"),
    ("주 2번", "주 두 번"),
    ("1달에 2번", "한 달에 두 번"),
    ("한 달에 2번", "한 달에 두 번"),
    ("총 3번", "총 세 번"),
    ("최대 5번까지", "최대 다섯 번까지"),
    ("3~5번 정도", "세 번에서 다섯 번 정도"),
    ("3-4번", "삼 번에서 사 번"),
    ("120번으로 전화 주세요", "일이공 번으로 전화 주세요"),
    # 달 is native, 개월 and 월 Sino
    ("3달", "세 달"),
    ("6개월", "육 개월"),
    ("10개월", "십 개월"),
    ("3달러", "삼 달러"),
    ("3개", "세 개"),
    # 부: copies of a document unless a part or a division; 부터 is a particle
    ("등본 2부 발급", "등본 두 부 발급"),
    ("2부씩", "두 부씩"),
    ("1부 리그", "일 부 리그"),
    ("2부리그", "이 부리그"),
    ("2부 공연", "이 부 공연"),
    ("제2부", "제이 부"),
    ("2부제 운행", "이 부제 운행"),
    ("3부터", "삼부터"),
    ("21부터 30까지", "이십일부터 삼십까지"),
]


@pytest.mark.parametrize(("text", "spoken"), CONTEXT_ROWS + CONTEXT_CASES)
def test_counter_in_context(text, spoken):
    assert normalize_korean(text) == spoken


MIXED_HUNDREDS = [
    ("100개", "백 개"),
    ("101개", "백한 개"),
    ("102명", "백두 명"),
    ("109살", "백아홉 살"),
    ("110개", "백십 개"),
    ("111개", "백십일 개"),
    ("120명", "백이십 명"),
    ("150명", "백오십 명"),
    ("200개", "이백 개"),
    ("205명", "이백다섯 명"),
    ("1,001개", "천한 개"),
    ("10001명", "만 한 명"),
    ("101번째", "백한 번째"),
    ("101대", "백한 대"),
    ("100대", "백 대"),
    ("3.5개", "삼 점 오 개"),
    ("0개", "영 개"),
    ("1만 명", "만 명"),
    ("제3장", "제삼 장"),
    ("제1권", "제일 권"),
]

CLOCK_HOURS = [
    ("1시", "한 시"),
    ("12시", "열두 시"),
    ("13시", "열세 시"),
    ("18시", "열여덟 시"),
    ("20시", "스무 시"),
    ("24시", "스물네 시"),
    ("25시", "이십오 시"),
    ("14:30", "열네 시 삼십 분"),
    ("오후 2시 5분 3초", "오후 두 시 오 분 삼 초"),
]

MONTH_NAMES = [
    ("1월", "일월"), ("2월", "이월"), ("3월", "삼월"), ("4월", "사월"), ("5월", "오월"), ("6월", "유월"),
    ("7월", "칠월"), ("8월", "팔월"), ("9월", "구월"), ("10월", "시월"), ("11월", "십일월"), ("12월", "십이월"),
]


@pytest.mark.parametrize(("text", "spoken"), MIXED_HUNDREDS + CLOCK_HOURS + MONTH_NAMES)
def test_numbers_hours_and_months(text, spoken):
    assert normalize_korean(text) == spoken


WEEKDAYS = [
    ("12월 3일(목)", "십이월 삼 일 목요일"),
    ("12월 3일(목요일)", "십이월 삼 일 목요일"),
    ("12월 3일 (목)", "십이월 삼 일 목요일"),
    ("12월 5일(토)", "십이월 오 일 토요일"),
    ("12월 6일(일)", "십이월 육 일 일요일"),
    ("6월 1일(월)", "유월 일 일 월요일"),
    ("6월 2일(화)", "유월 이 일 화요일"),
    ("10월 9일(금) 한글날", "시월 구 일 금요일 한글날"),
    ("10월 7일(수요일)", "시월 칠 일 수요일"),
    ("3/5(목) 예약 가능", "삼월 오 일 목요일 예약 가능"),
    ("12.24(목) 오전 10시", "십이월 이십사 일 목요일 오전 열 시"),
    ("2026. 12. 3.(목) 오후 2시", "이천이십육 년 십이월 삼 일 목요일 오후 두 시"),
    ("2026-12-05(토요일)", "이천이십육 년 십이월 오 일 토요일"),
    ("6월 10일(수)부터", "유월 십 일 수요일부터"),
    ("12월 3일(목)~12월 5일(토)", "십이월 삼 일 목요일부터 십이월 오 일 토요일까지"),
    ("3/2(월)~3/6(금)", "삼월 이 일 월요일부터 삼월 육 일 금요일까지"),
    ("12월 3일(목), 4일(금) 휴무", "십이월 삼 일 목요일, 사 일 금요일 휴무"),
    ("월~금 9시~18시", "월요일에서 금요일 아홉 시부터 열여덟 시까지"),
    ("마감(금)", "마감(금)"),  # not after a date: left as written
    ("12월 3일 목요일", "십이월 삼 일 목요일"),
]


@pytest.mark.parametrize(("text", "spoken"), WEEKDAYS)
def test_weekday_after_a_date(text, spoken):
    assert normalize_korean(text) == spoken


ALL_CASES = [(t, s) for _, t, s in COUNTER_ROWS] + CONTEXT_ROWS + CONTEXT_CASES + MIXED_HUNDREDS + CLOCK_HOURS \
    + MONTH_NAMES + WEEKDAYS


@pytest.mark.parametrize("text", [text for text, _ in ALL_CASES])
def test_idempotent_and_spelled_out(text):
    once = normalize_korean(text)
    assert normalize_korean(once) == once
    assert not any(ch.isascii() and ch.isalnum() for ch in once), once


def test_data_file_is_the_default():
    assert COUNTERS_FILE.name == "counters.toml" and COUNTERS_FILE.is_file()
    assert load_counters(COUNTERS_FILE) == load_counters()


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[counters]\n"개" = "korean"\n', "not one of"),
        ("[rules]\nnative_max = 99\n", "no [counters]"),
        ('[counters]\n"개" = "native"\n[native_max]\n"원" = 5\n', "not a native counter"),
        ('[counters]\n"원" = "sino"\n[first]\n"원" = "첫"\n', "not a native counter"),
        ('[counters]\n"개" = "native"\n[context."분"]\nswitch_to = "native"\n', "not in [counters]"),
        ('[counters]\n"분" = "sino"\n[context."분"]\nswitch_to = "sino"\n', "the other system"),
        ('[counters]\n"개" = "native"\n[not_followed_by]\n"부" = ["터"]\n', "not in [counters]"),
    ],
)
def test_bad_table_names_the_file(tmp_path: Path, toml, message):
    path = tmp_path / "counters.toml"
    path.write_text(toml, encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        load_counters(path)
    assert str(path) in str(err.value)
