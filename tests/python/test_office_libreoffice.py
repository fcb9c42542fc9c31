#!/usr/bin/python3
"""Office documents that LibreOffice wrote, translated through LibreTranslate's file API, and
read back by LibreOffice: .odt (a python-docx document that LibreOffice converted), .odp and
.pptx (a hand-written flat ODF presentation, .fodp, that LibreOffice converted), and .docx. Each
translation converts to PDF with LibreOffice; keeps its paragraphs, their styles and their bold
or italic spans or runs (now around translated words); has every paragraph translated with no
placeholder left; and keeps every zip entry but the translated parts byte for byte. An .odt
translates over gRPC's TranslateDocument as over HTTP.

Skips, saying why, without LibreOffice (`soffice` on PATH: Debian's libreoffice-writer-nogui and
libreoffice-impress-nogui) or python3-docx. Each class converts with one private LibreOffice
profile, so that a LibreOffice the user has open does not get in the way.
Run by ctest (python_office_libreoffice), or by hand from the repository root:
    GLOSSA_SERVER=build/glossa-server /usr/bin/python3 -m unittest -v \
        tests/python/test_office_libreoffice.py
"""

import io
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
import zipfile
from xml.sax.saxutils import escape

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_office_files as of  # noqa: E402  (documents, sentences, OfficeFileTestCase)

SOFFICE = shutil.which("soffice")
NO_SOFFICE = ("needs LibreOffice: `soffice` is not on PATH (Debian: apt-get install "
              "libreoffice-writer-nogui libreoffice-impress-nogui)")
SOFFICE_TIMEOUT_S = 120

TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
FO = "urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0"
DRAWINGML = "http://schemas.openxmlformats.org/drawingml/2006/main"

ODT_TYPE = "application/vnd.oasis.opendocument.text"
ODP_TYPE = "application/vnd.oasis.opendocument.presentation"
PPTX_TYPE = "application/vnd.openxmlformats-officedocument.presentationml.presentation"

ENGLISH = {"the", "and", "of", "he", "to", "his", "unto", "that"}

FODP_HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
    'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" '
    'office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.presentation">\n'
    '<office:automatic-styles><style:style style:name="T1" style:family="text">'
    '<style:text-properties fo:font-weight="bold"/></style:style></office:automatic-styles>\n'
    '<office:body><office:presentation>\n')
FODP_TAIL = "</office:presentation></office:body></office:document>\n"


def setUpModule():
    of.setUpModule()


def tearDownModule():
    of.tearDownModule()


def has_letters(text):
    return any(c.isalpha() for c in text)


def odf_paragraphs(content):
    """The text:p and text:h elements of an OpenDocument content.xml (bytes), in order."""
    root = ET.fromstring(content)
    return [e for e in root.iter() if e.tag in (f"{{{TEXT}}}p", f"{{{TEXT}}}h")]


def odf_marked_styles(content):
    """The automatic text styles of a content.xml that make text bold or italic."""
    root = ET.fromstring(content)
    names = set()
    for style in root.iter(f"{{{STYLE}}}style"):
        if style.get(f"{{{STYLE}}}family") != "text":
            continue
        for props in style.iter(f"{{{STYLE}}}text-properties"):
            if (props.get(f"{{{FO}}}font-weight") == "bold" or
                    props.get(f"{{{FO}}}font-style") == "italic"):
                names.add(style.get(f"{{{STYLE}}}name"))
    return names


def odf_spans(paragraph, styles):
    """{style name: text} of the paragraph's text:span elements with one of `styles`."""
    spans = {}
    for span in paragraph.iter(f"{{{TEXT}}}span"):
        name = span.get(f"{{{TEXT}}}style-name")
        if name in styles:
            spans[name] = spans.get(name, "") + "".join(span.itertext())
    return spans


def pptx_slides(data):
    """The slide parts of a .pptx (ppt/slides/slideN.xml), in slide order."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        names = [n for n in zf.namelist() if re.fullmatch(r"ppt/slides/slide\d+\.xml", n)]
    return sorted(names, key=lambda n: int(re.search(r"(\d+)\.xml$", n).group(1)))


def pptx_paragraphs(data):
    """[(text, bold text)] of each a:p with an a:t inside, slide by slide; bold text is that of
    the paragraph's runs whose a:rPr has b="1"."""
    out = []
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for name in pptx_slides(data):
            root = ET.fromstring(zf.read(name))
            for p in root.iter(f"{{{DRAWINGML}}}p"):
                texts = list(p.iter(f"{{{DRAWINGML}}}t"))
                if not texts:
                    continue
                bold = ""
                for run in p.iter(f"{{{DRAWINGML}}}r"):
                    props = run.find(f"{{{DRAWINGML}}}rPr")
                    if props is not None and props.get("b") in ("1", "true"):
                        bold += "".join(t.text or "" for t in run.iter(f"{{{DRAWINGML}}}t"))
                out.append(("".join(t.text or "" for t in texts), bold))
    return out


def read_entry(data, name):
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return zf.read(name)


def fodp(slides):
    """A flat ODF presentation of slides [(title, [paragraph, ...])]; a paragraph is a str or
    (before, bold, after)."""
    pages = []
    for i, (title, paragraphs) in enumerate(slides):
        body = ""
        for p in paragraphs:
            if isinstance(p, str):
                body += f"<text:p>{escape(p)}</text:p>"
            else:
                before, bold, after = p
                body += (f'<text:p>{escape(before)}<text:span text:style-name="T1">{escape(bold)}'
                         f"</text:span>{escape(after)}</text:p>")
        pages.append(
            f'<draw:page draw:name="p{i + 1}">'
            '<draw:frame svg:x="1cm" svg:y="1cm" svg:width="24cm" svg:height="3cm">'
            f"<draw:text-box><text:p>{escape(title)}</text:p></draw:text-box></draw:frame>"
            '<draw:frame svg:x="1cm" svg:y="5cm" svg:width="24cm" svg:height="10cm">'
            f"<draw:text-box>{body}</draw:text-box></draw:frame></draw:page>\n")
    return FODP_HEAD + "".join(pages) + FODP_TAIL


@unittest.skipUnless(SOFFICE, NO_SOFFICE)
class LibreOfficeTestCase(of.OfficeFileTestCase):
    """A server, a folder and a private LibreOffice profile per class."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        directory = tempfile.TemporaryDirectory(prefix="glossa-libreoffice-")
        cls.addClassCleanup(directory.cleanup)
        cls.tmp = directory.name
        cls.profile = pathlib.Path(cls.tmp, "profile").as_uri()
        cls.made = {}  # documents made once for the class's tests

    def soffice(self, path, convert_to):
        """LibreOffice's conversion of the file at `path` to `convert_to` ("pdf", "odt", ...),
        written beside it: the new file's path."""
        run = subprocess.run(
            [SOFFICE, f"-env:UserInstallation={self.profile}", "--headless", "--convert-to",
             convert_to, "--outdir", os.path.dirname(path), path],
            capture_output=True, text=True, timeout=SOFFICE_TIMEOUT_S)
        self.assertEqual(run.returncode, 0, f"soffice failed on {path}:\n{run.stdout}{run.stderr}")
        out = os.path.splitext(path)[0] + "." + convert_to.split(":")[0]
        self.assertTrue(os.path.isfile(out) and os.path.getsize(out) > 0,
                        f"soffice wrote no {out}:\n{run.stdout}{run.stderr}")
        return out

    def write(self, name, data):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def read(self, path):
        with open(path, "rb") as f:
            return f.read()

    def assertConvertsToPdf(self, name, data):
        """LibreOffice opens `data` (saved as `name`) and writes it as a PDF."""
        pdf = self.soffice(self.write(name, data), "pdf")
        self.assertTrue(self.read(pdf).startswith(b"%PDF-"), f"{pdf} is not a PDF")

    def assertEnglish(self, texts):
        words = set(re.findall(r"[a-z]+", " ".join(texts).lower()))
        self.assertTrue(ENGLISH & words, texts)

    def assertOdfTranslated(self, source, translated):
        """content.xml's paragraphs and headings: as many, with the same styles, each with
        letters translated, each bold or italic span still there around translated words; every
        other entry byte for byte the source's."""
        self.assertOtherEntriesKept(source, translated, {"content.xml"})
        src_xml, got_xml = read_entry(source, "content.xml"), read_entry(translated, "content.xml")
        src, got = odf_paragraphs(src_xml), odf_paragraphs(got_xml)
        self.assertEqual(len(got), len(src))
        style = f"{{{TEXT}}}style-name"
        self.assertEqual([p.get(style) for p in got], [p.get(style) for p in src])
        marked = odf_marked_styles(src_xml)
        self.assertTrue(marked, "the source has no bold or italic automatic style")
        self.assertTrue(marked <= odf_marked_styles(got_xml))
        spans_seen, texts = 0, []
        for i, (p, s) in enumerate(zip(got, src)):
            text, source_text = "".join(p.itertext()), "".join(s.itertext())
            with self.subTest(paragraph=i, source=source_text):
                if not has_letters(source_text):
                    self.assertEqual(of.normalized(text), of.normalized(source_text))
                    continue
                self.assertTranslated(text, source_text)
                texts.append(text)
                want = odf_spans(s, marked)
                got_spans = odf_spans(p, marked)
                self.assertEqual(set(got_spans), set(want), f"spans of {text!r}")
                for name, span_text in got_spans.items():
                    self.assertTrue(span_text.strip(), f"the {name} span of {text!r} is empty")
                    self.assertNotEqual(of.normalized(span_text), of.normalized(text),
                                        f"all of {text!r} is in the {name} span")
                spans_seen += len(want)
        self.assertTrue(spans_seen, "no paragraph of the source has a bold or italic span")
        self.assertEnglish(texts)
        return texts


class TextDocumentTest(LibreOfficeTestCase):
    """.odt (LibreOffice's conversion of a python-docx document) and .docx."""

    def source_docx(self):
        """A heading, three paragraphs (one with a bold word, one with an italic word) and a
        2x2 table, made with python-docx."""
        if "docx" not in self.made:
            lines = of.sentences(8)
            document = of.docx.Document()
            document.add_heading(lines[0], level=1)
            document.add_paragraph(lines[1])
            for line, kind in ((lines[2], "bold"), (lines[3], "italic")):
                p = document.add_paragraph()
                for i, piece in enumerate(of.split_words(line)):
                    # The others say "not bold" (Word's <w:b w:val="0"/>) in the bold paragraph,
                    # so that LibreOffice writes it as spans only; nothing in the italic one.
                    if i == 1 or kind == "bold":
                        setattr(p.add_run(piece), kind, i == 1)
                    else:
                        p.add_run(piece)
            table = document.add_table(rows=2, cols=2)
            for i, cell in enumerate(c for row in table.rows for c in row.cells):
                cell.text = lines[4 + i]
            self.made["docx"] = of.docx_bytes(document)
        return self.made["docx"]

    def source_odt(self):
        if "odt" not in self.made:
            docx_path = self.write("informe.docx", self.source_docx())
            self.made["odt"] = self.read(self.soffice(docx_path, "odt"))
        return self.made["odt"]

    def test_odt_paragraphs_styles_and_spans(self):
        source = self.source_odt()
        self.assertEqual(len(odf_paragraphs(read_entry(source, "content.xml"))), 8)
        out, headers = self.translate_bytes("informe.odt", source)
        self.assertDownload(headers, "informe.en.odt", ODT_TYPE)
        self.assertConvertsToPdf("informe-en.odt", out)
        texts = self.assertOdfTranslated(source, out)
        self.assertEqual(len(texts), 8)
        heading = odf_paragraphs(read_entry(out, "content.xml"))[0]
        self.assertEqual(heading.tag, f"{{{TEXT}}}h")

    def test_docx_converts_to_pdf(self):
        source = self.source_docx()
        out, headers = self.translate_bytes("informe.docx", source)
        self.assertDownload(headers, "informe.en.docx", of.DOCX_TYPE)
        self.assertOtherEntriesKept(source, out, {"word/document.xml"})
        self.assertConvertsToPdf("informe-en.docx", out)

    def test_grpc_odt_as_over_http(self):
        source = self.source_odt()
        over_http, _ = self.translate_bytes("x.odt", source)
        answer = self.translator.TranslateDocument(of.ts.pb.TranslateDocumentRequest(
            content=source, file_name="x.odt", source_language="es", target_language="en"),
            timeout=of.ts.RPC_TIMEOUT_S)
        self.assertEqual(answer.file_name, "x.en.odt")
        self.assertEqual(answer.source_language, "es")
        # libzip stamps each entry with the time it was written: compare the contents.
        self.assertEqual(of.zip_entries(answer.content), of.zip_entries(over_http))


class PresentationTest(LibreOfficeTestCase):
    """.odp and .pptx: LibreOffice's conversions of one hand-written flat ODF presentation."""

    def source_fodp(self):
        """Two slides, each a title and a text box of two paragraphs, the first of them with a
        bold span mid-sentence."""
        if "fodp" not in self.made:
            lines = of.sentences(6)
            slides = [(lines[0], [tuple(of.split_words(lines[1])), lines[2]]),
                      (lines[3], [tuple(of.split_words(lines[4])), lines[5]])]
            self.made["fodp"] = self.write("diapositivas.fodp", fodp(slides).encode("utf-8"))
        return self.made["fodp"]

    def converted(self, extension):
        if extension not in self.made:
            self.made[extension] = self.read(self.soffice(self.source_fodp(), extension))
        return self.made[extension]

    def test_odp_paragraphs_and_bold_spans(self):
        source = self.converted("odp")
        self.assertEqual(len(odf_paragraphs(read_entry(source, "content.xml"))), 6)
        out, headers = self.translate_bytes("diapositivas.odp", source)
        self.assertDownload(headers, "diapositivas.en.odp", ODP_TYPE)
        self.assertConvertsToPdf("diapositivas-en.odp", out)
        texts = self.assertOdfTranslated(source, out)
        self.assertEqual(len(texts), 6)

    def test_pptx_paragraphs_and_bold_runs(self):
        source = self.converted("pptx")
        slides = pptx_slides(source)
        self.assertEqual(len(slides), 2)
        out, headers = self.translate_bytes("diapositivas.pptx", source)
        self.assertDownload(headers, "diapositivas.en.pptx", PPTX_TYPE)
        self.assertConvertsToPdf("diapositivas-en.pptx", out)
        self.assertOtherEntriesKept(source, out, set(slides))
        src, got = pptx_paragraphs(source), pptx_paragraphs(out)
        self.assertEqual(len(src), 6)
        self.assertEqual(len(got), len(src))
        self.assertEqual([i for i, (_, bold) in enumerate(src) if bold], [1, 4])
        for i, ((text, bold), (source_text, source_bold)) in enumerate(zip(got, src)):
            with self.subTest(paragraph=i, source=source_text):
                self.assertTranslated(text, source_text)
                if source_bold:
                    self.assertTrue(bold.strip(), f"no bold run left in {text!r}")
                    self.assertNotEqual(of.normalized(bold), of.normalized(text),
                                        f"all of {text!r} is bold")
                else:
                    self.assertEqual(bold, "", f"bold text in {text!r}")
        self.assertEnglish([text for text, _ in got])


if __name__ == "__main__":
    unittest.main()
