"""The safe XML reader every XML input goes through (issue 24): a tree of frozen elements with
their lines; entity declarations, external references, deep nesting and too many elements
refused with one line naming the file and the line."""

from __future__ import annotations

import pytest

import simulator.xmlsafe
from simulator.errors import InputError
from simulator.limits import MAX_XML_NESTING
from simulator.xmlsafe import XmlElement, parse_xml, read_xml


def refusal(text: str) -> str:
    with pytest.raises(InputError) as error:
        parse_xml(text, "in.xml")
    return str(error.value)


def test_the_tree_keeps_tags_attributes_lines_and_text():
    root = parse_xml('<?xml version="1.0"?>\n<algo name="a">\n  <gpu id="0">\n    <tb/>\n'
                     '  </gpu>\n  <note>two words</note>\n</algo>\n', "in.xml")
    assert root == XmlElement("algo", {"name": "a"}, 2, (
        XmlElement("gpu", {"id": "0"}, 3, (XmlElement("tb", {}, 4),)),
        XmlElement("note", {}, 6, (), "two words")))
    assert str(root.children[0].problem("in.xml", "expected more")) == \
        "in.xml: <gpu> at line 3: expected more"


def test_the_text_is_utf8_whatever_the_declaration_says():
    # the file was read as UTF-8: a declared encoding cannot make the parser read it otherwise
    root = parse_xml('<?xml version="1.0" encoding="ISO-8859-1"?>\n<a b="é"/>\n', "in.xml")
    assert root.attrs["b"] == "é"


def test_an_external_dtd_is_refused():
    assert refusal('<!DOCTYPE a SYSTEM "http://example.com/a.dtd">\n<a/>\n') == (
        "in.xml: line 1: expected no external reference, got 'http://example.com/a.dtd': an XML "
        "input is read alone, never fetching another file or URL")


def test_an_internal_entity_is_refused():
    assert refusal('<!DOCTYPE a [\n<!ENTITY x "y">\n]>\n<a>&x;</a>\n') == (
        "in.xml: line 2: expected no entity declarations, got 'x': nested entities can expand a "
        "few lines into gigabytes (the billion laughs)")


def test_deep_nesting_is_refused_as_it_is_read():
    deep = "<a>" * 100_000 + "</a>" * 100_000
    assert refusal(deep) == f"in.xml: line 1: expected elements nested at most {MAX_XML_NESTING} deep"


def test_too_many_elements_are_refused(monkeypatch):
    monkeypatch.setattr(simulator.xmlsafe, "MAX_XML_ELEMENTS", 3)
    assert refusal("<a>\n<b/>\n<b/>\n<b/>\n</a>\n") == \
        "in.xml: line 4: expected at most 3 elements, got more"


@pytest.mark.parametrize(("text", "line"), [
    ("", "line 1: expected an XML file, got text that does not parse as XML (no element found, "
         "column 1)"),
    ("<a/><b/>", "line 1: expected an XML file, got text that does not parse as XML (junk after "
                 "document element, column 5)"),
])
def test_what_does_not_parse_is_one_line(text, line):
    assert refusal(text) == f"in.xml: {line}"


def test_a_file_is_read_through_the_bounded_reader(tmp_path):
    with pytest.raises(InputError) as error:
        read_xml(tmp_path, "an MSCCL schedule")
    assert str(error.value) == f"{tmp_path}: expected a regular file, got a directory"
    binary = tmp_path / "b.xml"
    binary.write_bytes(b"\xff\xfe<a/>")
    with pytest.raises(InputError) as error:
        read_xml(binary, "an MSCCL schedule")
    assert str(error.value) == f"{binary}: expected an MSCCL schedule in UTF-8"
