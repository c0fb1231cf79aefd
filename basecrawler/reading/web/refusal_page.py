"""A request the web view refuses or cannot answer now (plugins/basecrawler_guard.py), as a
small page of its own: HTML, or JSON for `.json`, the title Korean first with English beside."""
from __future__ import annotations

import json


def error_response(request_path: str, status: int, message: str, title: str) -> tuple[dict, bytes]:
    """A refusal as a small page of its own (JSON for .json), Korean first."""
    if request_path.endswith(".json"):
        body = json.dumps({"ok": False, "error": message, "status": status, "title": title},
                          ensure_ascii=False).encode("utf-8")
        kind = b"application/json; charset=utf-8"
    else:
        escaped = message.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        body = (f'<!DOCTYPE html><html lang="ko"><head><meta charset="utf-8"><title>{title}</title>'
                f'<link rel="stylesheet" href="/-/static/app.css"></head><body><div class="container">'
                f'<h1>{title}</h1><p class="message-error">{escaped}</p>'
                f'<p><a href="/">처음으로 / Home</a></p></div></body></html>').encode("utf-8")
        kind = b"text/html; charset=utf-8"
    headers = [(b"content-type", kind)]
    if status == 503:
        headers.append((b"retry-after", b"3"))
    return {"type": "http.response.start", "status": status, "headers": headers}, body


TITLES = {400: "요청을 처리할 수 없음 / Not answered", 403: "허용되지 않음 / Not allowed",
          405: "허용되지 않음 / Not allowed", 503: "잠시 뒤에 / Busy"}
