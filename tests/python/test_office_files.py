#!/usr/bin/python3
"""LibreTranslate's file API (POST /translate_file, GET /download_file/<name>) for office
documents and e-books, made and read back with independent libraries (Debian's python3-docx,
python3-openpyxl, python3-ebooklib): .docx paragraphs, headings, tables and bold/italic runs;
.xlsx text cells (shared strings, as Excel writes them, and inline strings, as openpyxl
writes them) beside numbers and formulas; .epub chapters with their inline markup and the
"mimetype" entry first and stored. Every zip entry the server does not translate comes back
byte for byte. Bad uploads (not a zip, a truncated zip, no word/document.xml, a zip bomb, XML
entity expansion, a PDF) get 400 with a clear message and leave the server up. (.pptx, .odt and
.odp have no Debian Python writer: this file leaves them out.)

Run by ctest (python_office_files), or by hand from the repository root:
    GLOSSA_SERVER=build/glossa-server /usr/bin/python3 -m unittest -v \
        tests/python/test_office_files.py
"""

import io
import os
import re
import socket
import subprocess
import sys
import tempfile
import unittest
import urllib.parse
import warnings
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_files as tf  # noqa: E402  (multipart bodies, FileTestCase, the Spanish lines)
import test_server as ts  # noqa: E402

try:  # Debian's Python (/usr/bin/python3) has them; setUpModule skips without them
    import docx
    import openpyxl
    from ebooklib import epub
except ImportError as e:
    docx = openpyxl = epub = None
    _MISSING = str(e)

DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
EPUB_TYPE = "application/epub+zip"

# A placeholder the server sends through translation (<g0>, </g1>, <x2/>) or its bare name.
PLACEHOLDER = re.compile(r"</?[gx]\d+/?>|\b[gx]\d+\b")


def setUpModule():
    if docx is None:
        raise unittest.SkipTest(f"needs python3-docx, python3-openpyxl and python3-ebooklib "
                                f"(run with /usr/bin/python3): {_MISSING}")
    ts.setUpModule()


def tearDownModule():
    ts.tearDownModule()


def sentences(n):
    """n short Spanish sentences of seven words or more (names alone may translate as
    themselves)."""
    lines = [line for line in tf.spanish_lines(60, 80) if len(line.split()) >= 7]
    assert len(lines) >= n, "the shared corpus is shorter than this test needs"
    return lines[:n]


def split_words(line, marks=1):
    """The line's words in 2 * marks + 1 pieces: text, a marked word, text, ... (spaces kept at
    the pieces' ends, so the pieces join to the line)."""
    words = line.split(" ")
    at = [len(words) * (k + 1) // (marks + 1) for k in range(marks)]
    pieces, start = [], 0
    for i in at:
        pieces += [(" " if start else "") + " ".join(words[start:i]) + " ", words[i]]
        start = i + 1
    return pieces + [" " + " ".join(words[start:])]


def docx_bytes(document):
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def zip_of(entries):
    """A zip archive (deflated) of [(name, bytes)]."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return out.getvalue()


def zip_entries(data):
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return [(info.filename, info.compress_type, zf.read(info.filename))
                for info in zf.infolist()]


def with_shared_strings(data):
    """An .xlsx of openpyxl's (which writes each text cell's string inline, t="inlineStr") with
    its strings in xl/sharedStrings.xml instead, referenced by index (t="s"), as Excel and
    LibreOffice write them."""
    strings = []

    def shared(m):
        strings.append(f"<si><t{m.group(2)}>{m.group(3)}</t></si>")
        return f'<c{m.group(1)} t="s"><v>{len(strings) - 1}</v></c>'

    entries = []
    for name, _, xml in zip_entries(data):
        text = xml.decode("utf-8")
        if name.startswith("xl/worksheets/sheet"):
            text = re.sub(r'<c([^>]*?) t="inlineStr"><is><t((?: [^>]*)?)>(.*?)</t></is></c>',
                          shared, text, flags=re.DOTALL)
        elif name == "[Content_Types].xml":
            text = text.replace("</Types>", (
                '<Override PartName="/xl/sharedStrings.xml" ContentType="application/'
                'vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>'))
        elif name == "xl/_rels/workbook.xml.rels":
            text = text.replace("</Relationships>", (
                '<Relationship Id="rIdStrings" Type="http://schemas.openxmlformats.org/'
                'officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/>'
                '</Relationships>'))
        entries.append((name, text.encode("utf-8")))
    assert strings, "openpyxl wrote no inline strings"
    entries.append(("xl/sharedStrings.xml", (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<sst xmlns="http://schemas.'
        f'openxmlformats.org/spreadsheetml/2006/main" count="{len(strings)}" '
        f'uniqueCount="{len(strings)}">' + "".join(strings) +
        "</sst>").encode("utf-8")))
    return zip_of(entries)


def normalized(text):
    return " ".join(text.split())


class OfficeFileTestCase(tf.FileTestCase):
    def translate_bytes(self, filename, data, **kwargs):
        """The downloaded translation of `data` (bytes) and its headers."""
        status, answer = self.upload(filename, data, **kwargs)
        self.assertEqual(status, 200, answer)
        return self.download(answer)

    def download(self, answer):
        """The file a /translate_file answer links to (bytes) and its headers."""
        self.assertEqual(set(answer), {"translatedFileUrl"}, answer)
        path = urllib.parse.urlparse(answer["translatedFileUrl"]).path
        self.assertRegex(path, r"^/download_file/[0-9a-f]{32}$")
        status, headers, out = self.request("GET", path)
        self.assertEqual(status, 200, out[:300])
        return out, headers

    def assertDownload(self, headers, file_name, content_type):
        self.assertEqual(headers["Content-Disposition"], f'attachment; filename="{file_name}"')
        self.assertEqual(headers["Content-Type"], content_type)

    def assertOtherEntriesKept(self, source, translated, translated_parts):
        """Entries in the same order, with the same names and compression; all but
        translated_parts byte for byte the source's."""
        got, want = zip_entries(translated), zip_entries(source)
        self.assertEqual([(n, c) for n, c, _ in got], [(n, c) for n, c, _ in want])
        for (name, _, data), (_, _, source_data) in zip(got, want):
            if name in translated_parts:
                self.assertTrue(data != source_data, f"{name} came back untranslated")
            else:
                self.assertTrue(data == source_data, f"{name} changed")

    def assertTranslated(self, got, source):
        self.assertTrue(got.strip(), f"{source!r} came back empty")
        self.assertNotEqual(normalized(got), normalized(source))
        self.assertNotRegex(got, r"[<>]")
        self.assertNotRegex(got, PLACEHOLDER)


    def docx_with_bold(self):
        lines = sentences(2)
        document = docx.Document()
        document.add_paragraph(lines[0])
        p = document.add_paragraph()
        for i, piece in enumerate(split_words(lines[1])):
            p.add_run(piece).bold = i % 2 == 1
        return docx_bytes(document)

    def document(self, content, file_name, source="es", target="en"):
        return self.translator.TranslateDocument(ts.pb.TranslateDocumentRequest(
            content=content, file_name=file_name, source_language=source,
            target_language=target), timeout=ts.RPC_TIMEOUT_S)


class OfficeFilesTest(OfficeFileTestCase):
    def test_docx_paragraphs_runs_and_table(self):
        lines = sentences(10)
        source = docx.Document()
        source.add_heading(lines[0], level=1)
        source.add_paragraph(lines[1])
        marks = {}  # paragraph index -> the marks ("bold", "italic") its runs had
        for index, line, kinds in ((2, lines[2], ("bold",)), (4, lines[4], ("italic",)),
                                   (5, lines[5], ("bold", "italic"))):
            if index == 4:
                source.add_paragraph(lines[3], style="List Bullet")
            p = source.add_paragraph()
            pieces = split_words(line, len(kinds))
            for i, piece in enumerate(pieces):
                run = p.add_run(piece)
                if i % 2:
                    setattr(run, kinds[i // 2], True)
            self.assertEqual(p.text, line)
            marks[index] = kinds
        table = source.add_table(rows=2, cols=2)
        for i, cell in enumerate(c for row in table.rows for c in row.cells):
            cell.text = lines[6 + i]
        data = docx_bytes(source)
        source = docx.Document(io.BytesIO(data))  # as the server reads it

        out, headers = self.translate_bytes("informe.docx", data)
        self.assertDownload(headers, "informe.en.docx", DOCX_TYPE)
        self.assertOtherEntriesKept(data, out, {"word/document.xml"})
        result = docx.Document(io.BytesIO(out))

        self.assertEqual([p.style.name for p in result.paragraphs],
                         [p.style.name for p in source.paragraphs])
        self.assertEqual(len(result.paragraphs), 6)
        self.assertEqual(result.paragraphs[0].style.name, "Heading 1")
        plain, plain_sources = [], []
        for i, (p, src) in enumerate(zip(result.paragraphs, source.paragraphs)):
            with self.subTest(paragraph=i):
                self.assertTranslated(p.text, src.text)
                for kind in marks.get(i, ()):
                    marked = "".join(r.text for r in p.runs if getattr(r, kind))
                    self.assertTrue(marked.strip(), f"no {kind} text in {p.text!r}")
                    self.assertNotEqual(normalized(marked), normalized(p.text),
                                        f"all of {p.text!r} is {kind}")
                if i not in marks:
                    self.assertTrue(all(not r.bold and not r.italic for r in p.runs))
                    plain.append(p.text)
                    plain_sources.append(src.text)

        self.assertEqual(len(result.tables), 1)
        got_table, src_table = result.tables[0], source.tables[0]
        self.assertEqual((len(got_table.rows), len(got_table.columns)), (2, 2))
        for r in range(2):
            for c in range(2):
                with self.subTest(cell=(r, c)):
                    got, src = got_table.cell(r, c).text, src_table.cell(r, c).text
                    self.assertTranslated(got, src)
                    plain.append(got)
                    plain_sources.append(src)
        # A paragraph of one run is one text: translated as POST /translate translates it.
        self.assertEqual(plain, self.libre(plain_sources))

    XLSX_NUMBERS = {"B1": 42, "B2": 3.25, "B3": -7}

    def make_xlsx(self, lines):
        """A workbook of openpyxl's: texts in A1..An, numbers in B, a formula in C1."""
        book = openpyxl.Workbook()
        sheet = book.active
        sheet.title = "Hoja"
        for i, line in enumerate(lines):
            sheet.cell(row=i + 1, column=1, value=line)
        for coordinate, value in self.XLSX_NUMBERS.items():
            sheet[coordinate] = value
        sheet["C1"] = "=B1*2"
        out = io.BytesIO()
        book.save(out)
        return out.getvalue()

    def check_xlsx(self, data, lines, translated_part):
        got, headers = self.translate_bytes("cuentas.xlsx", data)
        self.assertDownload(headers, "cuentas.en.xlsx", XLSX_TYPE)
        self.assertOtherEntriesKept(data, got, {translated_part})
        result = openpyxl.load_workbook(io.BytesIO(got))
        self.assertEqual(result.sheetnames, ["Hoja"])
        sheet = result["Hoja"]
        values = {c.coordinate: c.value for row in sheet.iter_rows() for c in row
                  if c.value is not None}
        texts = [f"A{i + 1}" for i in range(len(lines))]
        self.assertEqual(set(values), set(texts) | set(self.XLSX_NUMBERS) | {"C1"})
        for coordinate, value in self.XLSX_NUMBERS.items():
            self.assertEqual(values[coordinate], value)
        self.assertEqual(values["C1"], "=B1*2")
        texts = [values[t] for t in texts]
        for got_text, line in zip(texts, lines):
            self.assertTranslated(got_text, line)
        self.assertEqual(texts, self.libre(lines))

    def test_xlsx_shared_strings_numbers_and_formulas(self):
        # Text cells as Excel and LibreOffice write them: indexes into xl/sharedStrings.xml.
        lines = sentences(5)
        self.check_xlsx(with_shared_strings(self.make_xlsx(lines)), lines, "xl/sharedStrings.xml")

    def test_xlsx_inline_strings(self):
        # Text cells as openpyxl (and pandas.DataFrame.to_excel through it) writes them: each
        # string inline in the sheet (<c t="inlineStr"><is><t>...</t></is></c>).
        lines = sentences(5)
        self.check_xlsx(self.make_xlsx(lines), lines, "xl/worksheets/sheet1.xml")

    def make_epub(self, chapters):
        """An e-book of chapters [(title, [paragraph HTML])], as bytes."""
        book = epub.EpubBook()
        book.set_identifier("glossa-test-book")
        book.set_title("Libro de prueba")
        book.set_language("es")
        items = []
        for i, (title, paragraphs) in enumerate(chapters):
            item = epub.EpubHtml(title=title, file_name=f"cap{i + 1}.xhtml", lang="es")
            item.content = f"<h1>{title}</h1>" + "".join(f"<p>{p}</p>" for p in paragraphs)
            book.add_item(item)
            items.append(item)
        book.toc = items
        book.add_item(epub.EpubNcx())
        book.add_item(epub.EpubNav())
        book.spine = ["nav", *items]
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "libro.epub")
            epub.write_epub(path, book)
            with open(path, "rb") as f:
                return f.read()

    def read_epub(self, data):
        """{file name: XHTML text} of an e-book's documents, read by ebooklib."""
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "libro.epub")
            with open(path, "wb") as f:
                f.write(data)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                book = epub.read_epub(path)
        return {item.file_name: item.get_content().decode("utf-8")
                for item in book.get_items() if isinstance(item, epub.EpubHtml)}

    def test_epub_chapters_keep_markup_and_mimetype(self):
        lines = sentences(6)
        before, word, after = split_words(lines[2])
        bold = f"{before}<b>{word}</b>{after}"
        data = self.make_epub([("Capítulo uno", [lines[0], lines[1], bold]),
                               ("Capítulo dos", [lines[3], lines[4], lines[5]])])
        out, headers = self.translate_bytes("libro.epub", data)
        self.assertDownload(headers, "libro.en.epub", EPUB_TYPE)
        with zipfile.ZipFile(io.BytesIO(out)) as zf:
            self.assertIsNone(zf.testzip())
            first = zf.infolist()[0]
            self.assertEqual(first.filename, "mimetype")
            self.assertEqual(first.compress_type, zipfile.ZIP_STORED)
            self.assertEqual(zf.read("mimetype"), b"application/epub+zip")
        self.assertOtherEntriesKept(data, out, {"EPUB/cap1.xhtml", "EPUB/cap2.xhtml",
                                                "EPUB/nav.xhtml"})

        chapters = self.read_epub(out)
        self.assertIn("cap1.xhtml", chapters)
        self.assertIn("cap2.xhtml", chapters)
        paragraphs = {name: re.findall(r"<p>(.*?)</p>", chapters[name], re.DOTALL)
                      for name in ("cap1.xhtml", "cap2.xhtml")}
        self.assertEqual([len(p) for p in paragraphs.values()], [3, 3])
        got = paragraphs["cap1.xhtml"] + paragraphs["cap2.xhtml"]
        sources = lines[:6]
        for i, (text, line) in enumerate(zip(got, sources)):
            with self.subTest(paragraph=i):
                plain = re.sub(r"<[^>]*>", "", text)
                self.assertTranslated(plain, line)
        english = " ".join(re.sub(r"<[^>]*>", "", t) for t in got).lower().split()
        self.assertTrue({"the", "and", "of", "he", "to"} & set(english), english)
        # The bold word stays an element of its own in its paragraph, around translated text.
        marked = re.findall(r"<b>(.*?)</b>", got[2])
        self.assertEqual(len(marked), 1, got[2])
        self.assertTrue(marked[0].strip(), got[2])
        self.assertNotIn("<b>", "".join(got[:2] + got[3:]))
        for text in (got[0], got[1], got[3], got[4], got[5]):
            self.assertNotIn("<", text)
        self.assertEqual([got[0], got[1], *got[3:]],
                         self.libre([lines[0], lines[1], lines[3], lines[4], lines[5]]))
        titles = [re.search(r"<h1>(.*?)</h1>", chapters[n]).group(1)
                  for n in ("cap1.xhtml", "cap2.xhtml")]
        self.assertNotIn("Capítulo uno", titles)

    def test_download_names_and_types(self):
        line = sentences(1)[0]
        document = docx.Document()
        document.add_paragraph(line)
        _, headers = self.translate_bytes("informe.docx", docx_bytes(document))
        self.assertDownload(headers, "informe.en.docx", DOCX_TYPE)
        _, headers = self.translate_bytes("notas/Acta Final.DOCX", docx_bytes(document))
        self.assertDownload(headers, "Acta Final.en.DOCX", DOCX_TYPE)
        _, headers = self.translate_bytes("cuento.epub", self.make_epub([("Uno", [line])]))
        self.assertDownload(headers, "cuento.en.epub", EPUB_TYPE)


class TranslateDocumentTest(OfficeFileTestCase):
    """gRPC's TranslateDocument and glossa-client --document: the file API's translation."""

    def test_grpc_translates_as_the_file_api_does(self):
        data = self.docx_with_bold()
        over_http, _ = self.translate_bytes("informe.docx", data)
        for source in ("es", "auto"):
            with self.subTest(source=source):
                answer = self.document(data, "carpeta/informe.docx", source=source)
                self.assertEqual(answer.file_name, "informe.en.docx")
                self.assertEqual(answer.source_language, "es")
                self.assertEqual(answer.segments, 2)
                # libzip stamps each entry with the time it was written: compare the contents.
                self.assertEqual(zip_entries(answer.content), zip_entries(over_http))
        srt = "1\n00:00:01,000 --> 00:00:02,000\nY dijo Dios.\n"
        answer = self.document(srt.encode(), "a.srt")
        self.assertEqual(answer.content.decode(), srt.replace("Y dijo Dios.",
                                                              self.libre(["Y dijo Dios."])[0]))

    def test_grpc_errors(self):
        cases = [(b"hola", "a.docx", "en", "not a zip archive"),
                 (b"%PDF-1.4", "a.pdf", "en", "PDF is not supported"),
                 (b"", "a.txt", "en", "empty file"),
                 (b"Hola.", "a.txt", "zz", "not supported")]
        for content, name, target, message in cases:
            with self.subTest(name=name, target=target):
                with self.assertRaises(ts.grpc.RpcError) as caught:
                    self.document(content, name, target=target)
                self.assertEqual(caught.exception.code(), ts.grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn(message, caught.exception.details())

    def test_glossa_client_writes_the_translation_beside_the_file(self):
        client = os.path.join(os.path.dirname(os.path.abspath(ts.SERVER)), "glossa-client")
        data = self.docx_with_bold()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "informe.docx")
            with open(path, "wb") as f:
                f.write(data)
            run = subprocess.run(
                [client, "--server", self.server.address, "--document", path,
                 "--source_language", "es", "--target_language", "en"],
                capture_output=True, text=True, timeout=120)
            self.assertEqual(run.returncode, 0, run.stderr)
            out = os.path.join(tmp, "informe.en.docx")
            self.assertEqual(run.stdout, f"{out}\t2 segments from es\n")
            with open(out, "rb") as f:
                translated = f.read()
        over_http, _ = self.translate_bytes("informe.docx", data)
        self.assertEqual(zip_entries(translated), zip_entries(over_http))


class BatchFolderTest(OfficeFileTestCase):
    """glossa-batch --input_dir: a folder of documents through TranslateDocument, resumable."""

    def run_batch(self, *flags):
        batch = os.path.join(os.path.dirname(os.path.abspath(ts.SERVER)), "glossa-batch")
        return subprocess.run([batch, "--server", self.server.address, "--source_language", "es",
                               "--target_language", "en", "--concurrency", "2"] + list(flags),
                              capture_output=True, text=True, timeout=300)

    def test_a_folder_is_translated_and_resumed(self):
        docx_data = self.docx_with_bold()
        srt = "1\n00:00:01,000 --> 00:00:02,000\nY dijo Dios.\n"
        with tempfile.TemporaryDirectory() as tmp:
            src, out = os.path.join(tmp, "in"), os.path.join(tmp, "out")
            os.makedirs(os.path.join(src, "capitulos"))
            files = {"informe.docx": docx_data, "capitulos/uno.srt": srt.encode(),
                     "notas.txt": "Y vio Dios.\n".encode(), "foto.png": b"\x89PNG",
                     "roto.docx": b"hola"}
            for name, data in files.items():
                with open(os.path.join(src, name), "wb") as f:
                    f.write(data)
            run = self.run_batch("--input_dir", src, "--output_dir", out)
            self.assertEqual(run.returncode, 1, run.stderr)  # roto.docx failed, the rest done
            self.assertIn("roto.docx: INVALID_ARGUMENT: the .docx file is not a zip archive",
                          run.stderr)
            self.assertIn("documents: 4, translated 3, resumed 0, failed 1; other files left "
                          "alone: 1", run.stderr)
            self.assertEqual(sorted(os.listdir(out)),
                             [".glossa-batch-folder.journal", "capitulos", "informe.docx",
                              "notas.txt"])
            with open(os.path.join(out, "informe.docx"), "rb") as f:
                self.assertEqual(zip_entries(f.read()),
                                 zip_entries(self.document(docx_data, "informe.docx").content))
            with open(os.path.join(out, "capitulos", "uno.srt"), "rb") as f:
                self.assertEqual(f.read(), self.document(srt.encode(), "uno.srt").content)
            stamp = os.stat(os.path.join(out, "notas.txt")).st_mtime_ns

            run = self.run_batch("--input_dir", src, "--output_dir", out, "--resume")
            self.assertIn("translated 0, resumed 3, failed 1", run.stderr)
            self.assertEqual(os.stat(os.path.join(out, "notas.txt")).st_mtime_ns, stamp)
            with open(os.path.join(src, "notas.txt"), "w", encoding="utf-8") as f:
                f.write("Y dijo Dios.\n")  # changed since: translated again
            run = self.run_batch("--input_dir", src, "--output_dir", out, "--resume")
            self.assertIn("translated 1, resumed 2, failed 1", run.stderr)

            run = self.run_batch("--input_dir", src, "--output_dir", os.path.join(src, "x"))
            self.assertEqual(run.returncode, 2, run.stderr)
            self.assertIn("--output_dir must not be --input_dir or inside it", run.stderr)


class BadOfficeFilesTest(OfficeFileTestCase):
    def good_docx(self):
        document = docx.Document()
        document.add_paragraph(sentences(1)[0])
        return docx_bytes(document)

    def test_bad_files_are_refused_and_the_server_stays_up(self):
        good = self.good_docx()
        entries = [(name, data) for name, _, data in zip_entries(good)]
        no_document = zip_of([(n, d) for n, d in entries if n != "word/document.xml"])

        # 200 MiB of zeros in one entry, deflated to about 200 KB, beside a real document.
        bomb = io.BytesIO()
        with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name, data in entries:
                zf.writestr(name, data)
            with zf.open("word/media/zeros.bin", "w") as f:
                chunk = b"\0" * (1 << 20)
                for _ in range(200):
                    f.write(chunk)
        bomb = bomb.getvalue()
        self.assertLess(len(bomb), 1 << 20)

        cases = [
            ("not a zip", "hola.docx", b"hello", ("zip",)),
            ("truncated zip", "mitad.docx", good[:len(good) // 2], ("zip",)),
            ("no word/document.xml", "vacio.docx", no_document, ("word/document.xml",)),
            ("zip bomb", "bomba.docx", bomb, ("zip bomb",)),
            ("PDF", "informe.pdf", b"%PDF-1.4\n1 0 obj\n<<>>\nendobj\n%%EOF\n", ("PDF",)),
        ]
        for what, filename, data, mentions in cases:
            with self.subTest(what):
                status, answer = self.upload(filename, data)
                self.assertError(status, answer, 400, *mentions)

        # Billion laughs: entities nesting to 10^9 "lol"s in word/document.xml. The server's XML
        # parser (pugixml) never expands DTD entities, and a part that declares a DTD (no office
        # document does) is refused.
        dtd, previous = '<!ENTITY lol "lol">', "lol"
        for i in range(1, 10):
            dtd += f'<!ENTITY lol{i} "{f"&{previous};" * 10}">'
            previous = f"lol{i}"
        sentence = sentences(1)[0]
        laughs = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
                  f'<!DOCTYPE w:document [{dtd}]>'
                  '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/'
                  f'main"><w:body><w:p><w:r><w:t>{sentence}</w:t></w:r></w:p>'
                  '<w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>')
        laughs_docx = zip_of([(n, laughs.encode() if n == "word/document.xml" else d)
                              for n, d in entries])
        with self.subTest("billion laughs"):
            status, answer = self.upload("risas.docx", laughs_docx)
            self.assertError(status, answer, 400, "word/document.xml declares a DTD")

        # A 100 MB file: over HTTP the server answers 413 from the headers, before the body
        # (this server takes --max_file_mb 1); over gRPC the message is over --max_message_bytes.
        huge = 100 << 20
        with self.subTest("100 MB over HTTP"):
            with socket.create_connection(("127.0.0.1", self.server.http_port), timeout=30) as s:
                s.sendall(f"POST /translate_file HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                          f"multipart/form-data; boundary={tf.BOUNDARY}\r\n"
                          f"Content-Length: {huge}\r\n\r\n".encode())
                s.sendall(b"\0" * (1 << 20))
                reply = s.recv(4096)
            self.assertTrue(reply.startswith(b"HTTP/1.1 413"), reply[:200])
        with self.subTest("100 MB over gRPC"):
            with self.assertRaises(ts.grpc.RpcError) as caught:
                self.document(b"PK" + b"\0" * huge, "enorme.docx")
            self.assertEqual(caught.exception.code(), ts.grpc.StatusCode.RESOURCE_EXHAUSTED)

        self.assertServerAlive()
        self.assertTrue(self.libre(["Hola."])[0].strip())
        out, _ = self.translate_bytes("bueno.docx", good)
        self.assertIsNone(zipfile.ZipFile(io.BytesIO(out)).testzip())


if __name__ == "__main__":
    unittest.main()
