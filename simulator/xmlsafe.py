"""Reading XML input files safely: through :func:`simulator.inputs.read_text` (a regular file,
bounded in size, UTF-8), then ``defusedxml``'s SAX parser, which refuses entity declarations
(the "billion laughs": a few lines of nested entities expand to gigabytes) and external
references (a ``SYSTEM`` entity or DTD would read a local file or a URL), and a tree bounded in
nesting and elements. Every XML reader (NCCL's topology and graph dumps, MSCCL schedules) comes
through :func:`read_xml`, so each gets the same guards and the same one-line errors, naming the
file and the line (:class:`~simulator.errors.InputError`).

The tree is plain frozen values (:class:`XmlElement`: tag, attributes, line, children), so a
reader walks it without touching the parser.

>>> root = parse_xml('<system version="1">\\n  <cpu numaid="0"/>\\n</system>\\n', "topo.xml")
>>> root.tag, root.attrs["version"], root.children[0].where
('system', '1', '<cpu> at line 2')
"""

from __future__ import annotations

import io
import xml.sax
import xml.sax.handler
import xml.sax.xmlreader
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import defusedxml
import defusedxml.expatreader

from simulator.errors import InputError, Problem, quoted
from simulator.inputs import control_problem, read_text
from simulator.limits import MAX_XML_ELEMENTS, MAX_XML_NESTING


@dataclass(frozen=True)
class XmlElement:
    """One element as read: its tag, its attributes (names to values, as written), the line its
    start tag is on, its child elements in order and its text (stripped; '' if none)."""

    tag: str
    attrs: Mapping[str, str]
    line: int
    children: tuple[XmlElement, ...] = ()
    text: str = ""

    @property
    def where(self) -> str:
        """The element as error messages name it: ``<gpu> at line 12``."""
        return f"<{self.tag}> at line {self.line}"

    def problem(self, file: str, message: str) -> Problem:
        """A problem of this element of ``file``: ``file: <gpu> at line 12: message``."""
        return Problem(file, self.where, message)


def read_xml(path: Path, expected: str = "an XML file") -> XmlElement:
    """The root element of the XML file ``path``; InputError naming the file (and the line,
    where there is one) if it cannot be read, is not XML (saying it ``expected`` that), declares
    entities or external references, or nests or counts beyond the limits."""
    return parse_xml(read_text(path, f"{expected} in UTF-8"), str(path), expected)


def parse_xml(text: str, file: str, expected: str = "an XML file") -> XmlElement:
    """The root element of the XML document ``text`` read from ``file`` (:func:`read_xml`)."""
    handler = _TreeBuilder(file)
    data = text.encode("utf-8")
    # defusedxml.sax.make_parser()'s parser (forbidding entity declarations and external
    # references), fed the whole text at once: in 64 KB pieces expat scans a long attribute
    # again at every piece, and a 15 MB one took ~10 s instead of ~0.1 s
    parser = defusedxml.expatreader.DefusedExpatParser(bufsize=len(data) + 1)
    parser.setContentHandler(handler)
    source = xml.sax.xmlreader.InputSource(file)
    source.setByteStream(io.BytesIO(data))
    source.setEncoding("utf-8")  # the text was read as UTF-8: an encoding declaration says no more
    try:
        parser.parse(source)
    except defusedxml.EntitiesForbidden as error:
        raise InputError([Problem(file, handler.at(), _entity(error))]) from None
    except defusedxml.ExternalReferenceForbidden as error:
        raise InputError([Problem(file, handler.at(), (
            f"expected no external reference, got {quoted(error.sysid or error.pubid)}: an XML input "
            "is read alone, never fetching another file or URL"))]) from None
    except defusedxml.DefusedXmlException as error:  # DTD or processing instruction refused
        raise InputError([Problem(file, handler.at(), f"expected plain XML, got {error}")]) from None
    except xml.sax.SAXParseException as error:
        line, column = error.getLineNumber() or 1, (error.getColumnNumber() or 0) + 1
        raise InputError([Problem(file, f"line {line}", (
            f"expected {expected}, got text that does not parse as XML ({error.getMessage()}, "
            f"column {column})"))]) from None
    assert handler.root is not None  # expat raises on a document without an element
    return handler.root


def _entity(error: defusedxml.EntitiesForbidden) -> str:
    """What is wrong with an entity declaration: it reads elsewhere or it can expand."""
    if error.sysid or error.pubid:
        return (f"expected no external entity, got {quoted(error.name)} reading "
                f"{quoted(error.sysid or error.pubid)}: an XML input never reads another file or URL")
    return (f"expected no entity declarations, got {quoted(error.name)}: nested entities can expand "
            "a few lines into gigabytes (the billion laughs)")


@dataclass
class _Open:
    """An element whose end tag has not been read yet."""

    tag: str
    attrs: Mapping[str, str]
    line: int
    children: list[XmlElement] = field(default_factory=list)
    text: list[str] = field(default_factory=list)


class _TreeBuilder(xml.sax.handler.ContentHandler):
    """Builds the tree of :class:`XmlElement` from SAX events, counting elements and depth."""

    def __init__(self, file: str) -> None:
        super().__init__()
        self.file = file
        self.root: XmlElement | None = None
        self._open: list[_Open] = []
        self._elements = 0
        self._locator: xml.sax.xmlreader.Locator | None = None

    def setDocumentLocator(self, locator: xml.sax.xmlreader.Locator) -> None:
        self._locator = locator

    def at(self) -> str:
        """The line the parser is on (``line 3``), or '' before it has one."""
        line = self._locator.getLineNumber() if self._locator is not None else None
        return f"line {line}" if line else ""

    def startElement(self, name: str, attrs: xml.sax.xmlreader.AttributesImpl) -> None:
        self._elements += 1
        if self._elements > MAX_XML_ELEMENTS:
            raise InputError([Problem(self.file, self.at(), (
                f"expected at most {MAX_XML_ELEMENTS:,} elements, got more"))])
        if len(self._open) >= MAX_XML_NESTING:
            raise InputError([Problem(self.file, self.at(), (
                f"expected elements nested at most {MAX_XML_NESTING} deep"))])
        line = (self._locator.getLineNumber() if self._locator is not None else None) or 0
        for attribute, value in attrs.items():
            if problem := control_problem(value):
                raise InputError([Problem(self.file, f"<{name}> at line {line}",
                                          f"{attribute}: {problem}")])
        self._open.append(_Open(name, MappingProxyType(dict(attrs)), line))

    def characters(self, content: str) -> None:
        if self._open:
            self._open[-1].text.append(content)

    def endElement(self, name: str) -> None:
        done = self._open.pop()
        element = XmlElement(done.tag, done.attrs, done.line, tuple(done.children),
                             "".join(done.text).strip())
        if self._open:
            self._open[-1].children.append(element)
        else:
            self.root = element
