"""The one redaction rule: secrets out of every text we print (``asyncrecall._redact``)."""

from __future__ import annotations

import pytest

from asyncrecall import ModelAuthError
from asyncrecall._redact import REDACTED, redact, redact_error

KEY = "k3y-Very-Secret-4242"


def test_the_configured_key_is_taken_out_wherever_it_is() -> None:
    """The exact value given, also URL-quoted, is replaced; the rest of the line stays."""
    text = f"refused {KEY} (HTTP 401); as sent in a query: k3y%2FSlash%2Bplus99"
    clean = redact(text, [KEY, "k3y/Slash+plus99"])
    assert KEY not in clean and "Slash" not in clean
    assert clean == f"refused {REDACTED} (HTTP 401); as sent in a query: {REDACTED}"


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("Incorrect API key provided: sk-proj-abcdEFGH1234_xyz.", "sk-proj-abcdEFGH1234_xyz"),
        ("anthropic says sk-ant-api03-AbCdEf012345 is wrong", "sk-ant-api03-AbCdEf012345"),
        ("header was Authorization: Bearer abc.def-ghi_jkl", "abc.def-ghi_jkl"),
        ('{"api_key": "zz-plain-value-99"}', "zz-plain-value-99"),
        ("x-api-key: opaqueValue123", "opaqueValue123"),
        ("GET /v1/models?key=AIzaSyA1234567890abcdefghijklmnopqrstu", "AIzaSyA12345"),
        ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789 leaked", "ghp_abcdefghijklmno"),
        ("groq gsk_abcdefghijklmnop1234 refused", "gsk_abcdefghijklmnop1234"),
        ("cannot reach http://user:hunter2@host/v1", "hunter2"),
    ],
)
def test_common_key_shapes_are_taken_out_without_being_configured(text: str, gone: str) -> None:
    """A key the server echoes that we were not told about still goes, by its shape or
    the name before it."""
    clean = redact(text)
    assert gone not in clean
    assert REDACTED in clean or "user:" not in clean


def test_ordinary_words_and_short_values_stay() -> None:
    """A line without a secret is unchanged; a configured value too short to be a key
    (local servers take ``x``) is not hunted for in the text."""
    line = "http://127.0.0.1:8080/v1 refused the request with HTTP 400 (model `main`): bad x"
    assert redact(line, ["x", "test"]) == line


def test_an_exception_keeps_its_type_and_attributes() -> None:
    """``redact_error`` cleans the message in place: type, status and cause unchanged."""
    error = ModelAuthError(f"refused {KEY}", model="m", status=401)
    assert redact_error(error, [KEY]) is error
    assert str(error) == f"refused {REDACTED}" and error.status == 401
