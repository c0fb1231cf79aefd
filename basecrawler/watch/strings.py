"""Every reader-visible string of the watch channels in one place, Korean first with English
beside (so they can move into a message catalogue as they are)."""
from __future__ import annotations

CHANGE = {
    "new": "새 항목 · New",
    "changed": "변경됨 · Changed",
}
FEED_TITLE = "basecrawler 알림: {name} · watch: {name}"
FEED_ALL_TITLE = "basecrawler 새 항목 전체 · everything new"
FEED_SUBTITLE = "조건에 맞는 새 리콜·안전 정보 · new recalls and safety alerts matching the watch"
MAIL_SUBJECT_ONE = "[basecrawler] {change}: {title}"
MAIL_SUBJECT_DIGEST = "[basecrawler] {name}: {count}건 · {count} new or changed"
MAIL_INTRO = "감시 '{name}'에 맞는 항목입니다 · Records matching the watch '{name}'"
KOREAN = "한국어 · Korean"
ORIGINAL = "원문 · Original"
NO_TITLE = "(제목 없음 · no title)"
LINK = "원본 보기 · Source page"
SOURCE = "출처 · Source"
RECORD_TYPE = "종류 · Type"
WATCH_THIS = "이 검색 감시하기 · Watch this search"
WATCH_FEED = "감시 피드 · Watch feed"
STATES = {
    "held": "번역 대기 · waiting for Korean",
    "pending": "전송 대기 · pending",
    "sent": "전송됨 · sent",
    "failed": "실패 · failed",
    "superseded": "대체됨 · superseded",
}
