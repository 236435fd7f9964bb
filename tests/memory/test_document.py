"""Front matter parsing and rendering, and safe file names."""

from __future__ import annotations

import pytest

from asyncrecall.memory import safe_file_stem
from asyncrecall.memory._document import FrontMatterError, parse_document, render_document


def test_yaml_front_matter_is_parsed() -> None:
    """name, description and type come from the YAML block; the body follows it."""
    doc = parse_document(
        "---\nname: Style\ndescription: 'how: we write'\ntype: feedback\n---\nBody\nmore\n",
        default_name="x",
    )
    assert (doc.name, doc.description, doc.type, doc.body) == (
        "Style",
        "how: we write",
        "feedback",
        "Body\nmore",
    )


def test_unquoted_colon_falls_back_to_key_value_lines() -> None:
    """YAML rejects ``description: tests: never mock the db``; the key: value fallback keeps it."""
    doc = parse_document(
        "---\nname: Testing\ndescription: tests: never mock the db\ntype: feedback\n---\nbody\n",
        default_name="x",
    )
    assert doc.description == "tests: never mock the db"
    assert doc.type == "feedback"


def test_missing_name_defaults_to_the_file_stem() -> None:
    doc = parse_document("---\ntype: user\n---\nbody", default_name="stem")
    assert (doc.name, doc.description) == ("stem", "")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no front matter\n", "no front matter"),
        ("---\nname: x\ntype: user\n", "not closed"),
        ("---\nname: x\n---\nbody", "no type"),
        ("---\nname: x\ntype: secret\n---\nbody", "unknown type 'secret'"),
        ("", "no front matter"),
    ],
)
def test_unusable_front_matter_says_why(text: str, reason: str) -> None:
    with pytest.raises(FrontMatterError, match=reason):
        parse_document(text, default_name="x")


def test_bom_and_crlf_are_accepted() -> None:
    doc = parse_document("\ufeff---\r\nname: W\r\ntype: user\r\n---\r\nbody\r\n", default_name="x")
    assert (doc.name, doc.type) == ("W", "user")


def test_rendered_documents_are_valid_yaml_and_round_trip() -> None:
    """What we write parses back identically, colons and quotes included."""
    text = render_document(
        name="Testing: policy", description="tests: never 'mock' \"db\"", type="feedback", body="b"
    )
    doc = parse_document(text, default_name="x")
    assert (doc.name, doc.description, doc.type, doc.body) == (
        "Testing: policy",
        "tests: never 'mock' \"db\"",
        "feedback",
        "b",
    )
    import yaml

    header = text.split("---\n")[1]
    assert yaml.safe_load(header)["description"] == "tests: never 'mock' \"db\""


@pytest.mark.parametrize(
    ("name", "stem"),
    [
        ("Testing policy", "testing-policy"),
        ("../../etc/passwd", "etc-passwd"),
        ("Café au lait!", "cafe-au-lait"),
        ("a/b\\c", "a-b-c"),
    ],
)
def test_safe_file_stem(name: str, stem: str) -> None:
    assert safe_file_stem(name) == stem


def test_safe_file_stem_of_a_name_without_ascii_is_a_stable_hash() -> None:
    stem = safe_file_stem("日本語")
    assert stem.startswith("memory-") and stem == safe_file_stem("日本語")
    assert len(safe_file_stem("x" * 500)) <= 64
