// Documents (server/documents/): each format's segments, the file written back byte for byte
// with its own text, only the text changed by a translation, and the refusals.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/files/read_document.h"
#include "text/inline_tags.h"

namespace glossa::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Document> Read(absl::string_view name, absl::string_view bytes,
                               const DocumentLimits& limits = {}) {
  auto document = ReadDocument(name, std::string(bytes), limits);
  EXPECT_TRUE(document.ok()) << document.status();
  return document.ok() ? std::move(*document) : nullptr;
}

// Each text in upper case, outside its placeholders and character references.
std::vector<std::string> Upper(const std::vector<std::string>& texts) {
  std::vector<std::string> out;
  for (std::string text : texts) {
    char markup_end = 0;
    for (char& c : text) {
      if (markup_end == 0 && (c == '<' || c == '&')) markup_end = c == '<' ? '>' : ';';
      if (markup_end == 0) c = absl::ascii_toupper(c);
      if (c == markup_end) markup_end = 0;
    }
    out.push_back(text);
  }
  return out;
}

std::string WriteOrDie(const Document& document, const std::vector<std::string>& translations) {
  auto out = document.Write(translations);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}

// The file comes back byte for byte when each segment is "translated" as itself.
void ExpectRoundTrip(absl::string_view name, absl::string_view bytes) {
  std::unique_ptr<Document> document = Read(name, bytes);
  ASSERT_NE(document, nullptr);
  EXPECT_EQ(WriteOrDie(*document, document->texts()), bytes) << name;
}

int Occurrences(absl::string_view text, absl::string_view what) {
  int n = 0;
  for (size_t at = text.find(what); at != absl::string_view::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

// --- plain text ---------------------------------------------------------------------------------

constexpr absl::string_view kText =
    "\xEF\xBB\xBF"
    "Hola mundo.\r\n  Segunda línea con sangría  \r\n\r\n \t \n\tTercera\n"
    "sin salto final";

TEST(PlainTextTest, EachNonBlankLineIsASegmentWithoutItsBlanks) {
  auto document = Read("notas.txt", kText);
  ASSERT_NE(document, nullptr);
  EXPECT_THAT(document->texts(), ElementsAre("Hola mundo.", "Segunda línea con sangría", "Tercera",
                                             "sin salto final"));
  ExpectRoundTrip("notas.txt", kText);
  EXPECT_EQ(WriteOrDie(*document, Upper(document->texts())),
            "\xEF\xBB\xBF"
            "HOLA MUNDO.\r\n  SEGUNDA LíNEA CON SANGRíA  \r\n\r\n \t \n\tTERCERA\n"
            "SIN SALTO FINAL");
}

TEST(PlainTextTest, LinesWithoutALetterAreNotSegments) {
  auto document = Read("a.txt", "1.\n-- 2024 --\n¿?\nB2\n");
  ASSERT_NE(document, nullptr);
  EXPECT_THAT(document->texts(), ElementsAre("¿?", "B2"));  // '¿' is past ASCII: it counts
}

TEST(PlainTextTest, EmptyAndBlankFilesHaveNoSegments) {
  for (absl::string_view bytes : {"", "\n", "\r\n\r\n", "\xEF\xBB\xBF", "  \t "}) {
    auto document = Read("vacío.txt", bytes);
    ASSERT_NE(document, nullptr);
    EXPECT_TRUE(document->texts().empty());
    EXPECT_EQ(WriteOrDie(*document, {}), bytes);
  }
}

TEST(PlainTextTest, ALineBreakInATranslationDoesNotAddLines) {
  auto document = Read("a.txt", "uno\ndos\n");
  ASSERT_NE(document, nullptr);
  EXPECT_EQ(WriteOrDie(*document, {"one\r\nline", "two"}), "one  line\ntwo\n");
}

TEST(PlainTextTest, AnEmptyTranslationKeepsTheSourceText) {
  auto document = Read("a.txt", "uno\n  dos\n");
  ASSERT_NE(document, nullptr);
  EXPECT_EQ(WriteOrDie(*document, {"", " \n "}), "uno\n  dos\n");
  EXPECT_EQ(WriteOrDie(*document, {"  one ", "two"}), "one\n  two\n");
}

// --- subtitles ----------------------------------------------------------------------------------

constexpr absl::string_view kSubRip =
    "1\n"
    "00:00:01,000 --> 00:00:04,000\n"
    "Hola, ¿cómo estás\n"
    "esta mañana?\n"
    "\n"
    "2\n"
    "00:00:05,000 --> 00:00:07,500\n"
    "<i>Muy bien, gracias.</i>\n"
    "\n"
    "3\n"
    "00:00:08,000 --> 00:00:10,000 X1:40 X2:600\n"
    "{\\an8}¿Vienes <b>ya</b>?\n"
    "Sí, ahora voy.\n";

TEST(SubRipTest, EachCueIsOneSegmentCutAtTags) {
  auto document = Read("película.srt", kSubRip);
  ASSERT_NE(document, nullptr);
  EXPECT_THAT(document->texts(), ElementsAre("Hola, ¿cómo estás esta mañana?", "Muy bien, gracias.",
                                             "¿Vienes", "ya", "? Sí, ahora voy."));
  ExpectRoundTrip("película.srt", kSubRip);
  ExpectRoundTrip("película.srt", absl::StrReplaceAll(kSubRip, {{"\n", "\r\n"}}));
  ExpectRoundTrip("película.srt", kSubRip.substr(0, kSubRip.size() - 1));  // no final newline
}

TEST(SubRipTest, UpperCaseChangesOnlyTheText) {
  auto document = Read("película.srt", kSubRip);
  ASSERT_NE(document, nullptr);
  const std::string out = WriteOrDie(*document, Upper(document->texts()));
  EXPECT_EQ(out,
            "1\n"
            "00:00:01,000 --> 00:00:04,000\n"
            "HOLA, ¿CóMO ESTáS\n"
            "ESTA MAñANA?\n"
            "\n"
            "2\n"
            "00:00:05,000 --> 00:00:07,500\n"
            "<i>MUY BIEN, GRACIAS.</i>\n"
            "\n"
            "3\n"
            "00:00:08,000 --> 00:00:10,000 X1:40 X2:600\n"
            "{\\an8}¿VIENES <b>YA</b>?\n"
            "Sí, AHORA VOY.\n");
}

TEST(SubRipTest, ATranslationIsWrappedOnTheCuesLines) {
  const std::string crlf = absl::StrReplaceAll(kSubRip, {{"\n", "\r\n"}});
  auto document = Read("película.srt", crlf);
  ASSERT_NE(document, nullptr);
  const std::string out =
      WriteOrDie(*document, {"Hello, how are you this morning?", "Very well,\nthank you.",
                             "Are you coming", "now", "? Yes, I am coming."});
  EXPECT_THAT(out, HasSubstr("00:00:04,000\r\nHello, how are you\r\nthis morning?\r\n\r\n2\r\n"));
  EXPECT_THAT(out, HasSubstr("\r\n<i>Very well, thank you.</i>\r\n"));
  EXPECT_THAT(out, HasSubstr("{\\an8}Are you coming <b>now</b>?\r\nYes, I am coming.\r\n"));
  EXPECT_EQ(Occurrences(out, " --> "), 3);
  auto again = Read("película.srt", out);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->texts().size(), document->texts().size());
}

TEST(SubRipTest, AWordTooFewForTheLinesStaysOnOneLine) {
  auto document = Read("a.srt", "1\n00:00:01,000 --> 00:00:02,000\nHola\nmundo\n");
  ASSERT_NE(document, nullptr);
  EXPECT_EQ(WriteOrDie(*document, {"Hello"}), "1\n00:00:01,000 --> 00:00:02,000\nHello\n");
  EXPECT_EQ(WriteOrDie(*document, {"  Hello   big   world "}),
            "1\n00:00:01,000 --> 00:00:02,000\nHello\nbig world\n");
}

constexpr absl::string_view kWebVtt =
    "WEBVTT - Ejemplo\n"
    "Kind: captions\n"
    "\n"
    "NOTE Esto es un comentario\n"
    "que ocupa dos líneas\n"
    "\n"
    "STYLE\n"
    "::cue { color: yellow }\n"
    "\n"
    "intro\n"
    "00:00:00.000 --> 00:00:02.000 align:start position:10%\n"
    "<v Ana>Buenos días a todos.\n"
    "\n"
    "00:00:02.500 --> 00:00:05.000\n"
    "<c.amarillo>Hoy hablamos</c> de\n"
    "la traducción automática.\n";

TEST(WebVttTest, HeaderNotesAndStylesAreKept) {
  auto document = Read("charla.VTT", kWebVtt);
  ASSERT_NE(document, nullptr);
  EXPECT_THAT(document->texts(),
              ElementsAre("Buenos días a todos.", "Hoy hablamos", "de la traducción automática."));
  ExpectRoundTrip("charla.vtt", kWebVtt);
  ExpectRoundTrip("charla.vtt", absl::StrCat("\xEF\xBB\xBF", kWebVtt));
  ExpectRoundTrip("charla.vtt", absl::StrReplaceAll(kWebVtt, {{"\n", "\r\n"}}));
  const std::string out = WriteOrDie(*document, Upper(document->texts()));
  EXPECT_EQ(out,
            "WEBVTT - Ejemplo\n"
            "Kind: captions\n"
            "\n"
            "NOTE Esto es un comentario\n"
            "que ocupa dos líneas\n"
            "\n"
            "STYLE\n"
            "::cue { color: yellow }\n"
            "\n"
            "intro\n"
            "00:00:00.000 --> 00:00:02.000 align:start position:10%\n"
            "<v Ana>BUENOS DíAS A TODOS.\n"
            "\n"
            "00:00:02.500 --> 00:00:05.000\n"
            "<c.amarillo>HOY HABLAMOS</c> DE\n"
            "LA TRADUCCIóN AUTOMáTICA.\n");
  for (absl::string_view tag : {"<v Ana>", "<c.amarillo>", "</c>"}) {
    EXPECT_EQ(Occurrences(out, tag), 1) << tag;
  }
}

// --- Markdown -----------------------------------------------------------------------------------

constexpr absl::string_view kMarkdown = R"md(---
title: Guía
---

# Título principal #

Este es un párrafo que
continúa en otra línea con `código en línea` y un
[enlace](https://ejemplo.com/ruta) al final.

> Una cita
> de dos líneas.

- Primer elemento
- Segundo elemento con **énfasis**
  que sigue aquí.
1. [ ] Tarea pendiente

| Nombre | Descripción |
|--------|:-----------:|
| Gato   | Un animal   |

```python
print("no traducir")
```

    código indentado

<div>
Bloque HTML
</div>

***

[ref]: https://ejemplo.com
Visite https://ejemplo.com/x para más. ![Un gato](gato.png)
Subtítulo
---------
)md";

TEST(MarkdownTest, TextOutsideCodeAndMarkupIsSegmented) {
  auto document = Read("guía.md", kMarkdown);
  ASSERT_NE(document, nullptr);
  EXPECT_THAT(document->texts(),
              ElementsAre("Título principal", "Este es un párrafo que continúa en otra línea con",
                          "y un", "enlace", "al final.", "Una cita de dos líneas.",
                          "Primer elemento", "Segundo elemento con **énfasis** que sigue aquí.",
                          "Tarea pendiente", "Nombre", "Descripción", "Gato", "Un animal", "Visite",
                          "para más.", "Un gato", "Subtítulo"));
  ExpectRoundTrip("guía.md", kMarkdown);
  ExpectRoundTrip("guía.md", absl::StrReplaceAll(kMarkdown, {{"\n", "\r\n"}}));
  ExpectRoundTrip("guía.md", kMarkdown.substr(0, kMarkdown.size() - 1));
}

TEST(MarkdownTest, UpperCaseChangesOnlyTheText) {
  auto document = Read("guía.md", kMarkdown);
  ASSERT_NE(document, nullptr);
  EXPECT_EQ(WriteOrDie(*document, Upper(document->texts())), R"md(---
title: Guía
---

# TíTULO PRINCIPAL #

ESTE ES UN PáRRAFO QUE
CONTINúA EN OTRA LíNEA CON `código en línea` Y UN
[ENLACE](https://ejemplo.com/ruta) AL FINAL.

> UNA CITA
> DE DOS LíNEAS.

- PRIMER ELEMENTO
- SEGUNDO ELEMENTO CON **éNFASIS**
  QUE SIGUE AQUí.
1. [ ] TAREA PENDIENTE

| NOMBRE | DESCRIPCIóN |
|--------|:-----------:|
| GATO   | UN ANIMAL   |

```python
print("no traducir")
```

    código indentado

<div>
Bloque HTML
</div>

***

[ref]: https://ejemplo.com
VISITE https://ejemplo.com/x PARA MáS. ![UN GATO](gato.png)
SUBTíTULO
---------
)md");
}

TEST(MarkdownTest, AParagraphTranslationKeepsTheLineBreaksAndQuoteMarkers) {
  auto document = Read("cita.md", "> Una cita que sigue\r\n> en una segunda línea.\r\n");
  ASSERT_NE(document, nullptr);
  EXPECT_THAT(document->texts(), ElementsAre("Una cita que sigue en una segunda línea."));
  EXPECT_EQ(WriteOrDie(*document, {"A quote that goes on in a second line."}),
            "> A quote that goes\r\n> on in a second line.\r\n");
  EXPECT_EQ(WriteOrDie(*document, {"Quote."}), "> Quote.\r\n");
}

TEST(MarkdownTest, NoWrittenLineStartsWithMarkdownSyntax) {
  auto document = Read("a.md", "Uno dos tres\ncuatro cinco seis\n");
  ASSERT_NE(document, nullptr);
  // The nearest space to the source's break is before "- 3", which would start a list item.
  EXPECT_EQ(WriteOrDie(*document, {"One two - 3 four five six"}), "One two -\n3 four five six\n");
  EXPECT_EQ(WriteOrDie(*document, {"One two # three 1. four"}), "One two #\nthree 1. four\n");
}

TEST(MarkdownTest, CodeSpansAndLinksMayRunOverALineBreak) {
  constexpr absl::string_view kWrapped =
      "> Ejecute `make\n> test` en la [carpeta\n> del proyecto](docs/a.md) y espere.\n";
  auto document = Read("a.md", kWrapped);
  ASSERT_NE(document, nullptr);
  EXPECT_THAT(document->texts(),
              ElementsAre("Ejecute", "en la", "carpeta del proyecto", "y espere."));
  ExpectRoundTrip("a.md", kWrapped);
  EXPECT_EQ(WriteOrDie(*document, {"Run", "in the", "project folder", "and wait."}),
            "> Run `make\n> test` in the [project\n> folder](docs/a.md) and wait.\n");
}

TEST(MarkdownTest, APipeInACellsTranslationIsEscaped) {
  constexpr absl::string_view kTable = "| a | b |\n|---|---|\n| uno \\| dos | tres |\n";
  auto document = Read("a.md", kTable);
  ASSERT_NE(document, nullptr);
  EXPECT_THAT(document->texts(), ElementsAre("a", "b", "uno \\| dos", "tres"));
  EXPECT_EQ(WriteOrDie(*document, {"a", "b", "one | two \\| x", "three\\"}),
            "| a | b |\n|---|---|\n| one \\| two \\| x | three\\\\ |\n");
}

TEST(MarkdownTest, UnclosedFenceAndCodeSpanAreHandled) {
  auto document = Read("a.md", "Texto con `comilla sin cerrar\n\n```\ncódigo sin cerrar\n");
  ASSERT_NE(document, nullptr);
  EXPECT_THAT(document->texts(), ElementsAre("Texto con `comilla sin cerrar"));
  ExpectRoundTrip("a.md", "Texto con `comilla sin cerrar\n\n```\ncódigo sin cerrar\n");
}

// --- HTML ---------------------------------------------------------------------------------------

constexpr absl::string_view kHtml =
    "<!DOCTYPE html>\n<html><head><title>Página</title><style>p { color: red }</style></head>\n"
    "<body>\n  <p>Hola &amp; adi&oacute;s</p>\n  <p>  Mundo <b>cruel</b>.</p>\n"
    "<script>var x = 'no';</script><pre>sin traducir</pre>\n</body></html>\n";

TEST(HtmlTest, RunsOfTextAndInlineTagsAreSegmentsAndTheRestIsKept) {
  auto document = Read("página.HTML", kHtml);
  ASSERT_NE(document, nullptr);
  EXPECT_TRUE(document->inline_tags());
  EXPECT_THAT(document->texts(),
              ElementsAre("Página", "Hola &amp; adiós", "Mundo <g0>cruel</g0>."));
  ExpectRoundTrip("página.htm", kHtml);
  ExpectRoundTrip("página.htm", absl::StrReplaceAll(kHtml, {{"\n", "\r\n"}}));
  auto crlf = Read("página.htm", "<p>\r\n  Hola\r\n</p>");
  ASSERT_NE(crlf, nullptr);
  EXPECT_THAT(crlf->texts(), ElementsAre("Hola"));
  EXPECT_EQ(WriteOrDie(*crlf, {"Hello"}), "<p>\r\n  Hello\r\n</p>");
  EXPECT_EQ(WriteOrDie(*document, Upper(document->texts())),
            "<!DOCTYPE html>\n<html><head><title>PáGINA</title><style>p { color: red }</style>"
            "</head>\n<body>\n  <p>HOLA &amp; ADIóS</p>\n  <p>  MUNDO <b>CRUEL</b>.</p>\n"
            "<script>var x = 'no';</script><pre>sin traducir</pre>\n</body></html>\n");
}

TEST(HtmlTest, InlineElementsArePlaceholdersWrittenBackWhereTheTranslationPutsThem) {
  const std::string html =
      "<p>Ver <a href=\"x.html\" title=\"t\">la <i>casa</i></a> y <img src=\"c.png\"> "
      "el <code>a &lt; b</code><!-- nota --> fin.</p>";
  auto document = Read("a.html", html);
  ASSERT_NE(document, nullptr);
  EXPECT_THAT(document->texts(),
              ElementsAre("Ver <g0>la <g1>casa</g1></g0> y <x2/> el <x3/><x4/> fin."));
  ExpectRoundTrip("a.html", html);
  EXPECT_EQ(WriteOrDie(*document, {"<x4/>See <x2/> <g0>the <g1>house</g1></g0> &amp; <x3/>."}),
            "<p><!-- nota -->See <img src=\"c.png\"> <a href=\"x.html\" title=\"t\">the "
            "<i>house</i></a> &amp; <code>a &lt; b</code>.</p>");
  // Whatever the translation lacks is added at its end; what it makes up is text.
  EXPECT_EQ(WriteOrDie(*document, {"<g1>casa <b>x</b>"}),
            "<p><i>casa &lt;b&gt;x&lt;/b&gt;</i><a href=\"x.html\" title=\"t\"></a>"
            "<img src=\"c.png\"><code>a &lt; b</code><!-- nota --></p>");
}

TEST(HtmlTest, BlocksLineBreaksAndTagsTheParserImpliedCutRuns) {
  auto document = Read("a.html",
                       "<ul><li>Uno <b>dos</b><li>Tres<br>cuatro</ul><p>Sin <b>cerrar</p>");
  ASSERT_NE(document, nullptr);
  EXPECT_THAT(document->texts(),
              ElementsAre("Uno <g0>dos</g0>", "Tres", "cuatro", "Sin", "cerrar"));
}

TEST(HtmlTest, ARunWithMoreElementsThanARequestTakesIsSentNodeByNode) {
  std::string html = "<p>";
  for (size_t i = 0; i <= kMaxInlineTags; ++i) absl::StrAppend(&html, "palabra <b>x</b> ");
  html += "</p>";
  auto document = Read("a.html", html);
  ASSERT_NE(document, nullptr);
  EXPECT_EQ(document->texts().size(), 2 * (kMaxInlineTags + 1));
  EXPECT_EQ(document->texts()[0], "palabra");
  ExpectRoundTrip("a.html", html);
}

// --- refusals and limits ------------------------------------------------------------------------

TEST(ReadDocumentTest, RefusesPdfAndUnknownFormatsNamingTheSupportedOnes) {
  EXPECT_THAT(SupportedDocumentFormats(),
              ElementsAre(".txt", ".md", ".markdown", ".srt", ".vtt", ".html", ".htm", ".docx",
                          ".pptx", ".xlsx", ".odt", ".odp", ".epub"));
  EXPECT_THAT(SupportedDocumentFormats(), ::testing::ElementsAreArray(kDocumentExtensions));
  for (absl::string_view name : {"informe.PDF", "carta.doc", "notas", "dir.txt/notas"}) {
    auto document = ReadDocument(name, "Hola", {});
    ASSERT_FALSE(document.ok()) << name;
    EXPECT_EQ(document.status().code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& format : SupportedDocumentFormats()) {
      EXPECT_THAT(document.status().message(), HasSubstr(format)) << name;
    }
  }
  EXPECT_THAT(ReadDocument("informe.pdf", "%PDF-1.7", {}).status().message(),
              HasSubstr("PDF is not supported; supported formats: .txt, .md"));
  EXPECT_THAT(ReadDocument("carta.doc", "", {}).status().message(),
              HasSubstr("unsupported file format .doc"));
}

TEST(ReadDocumentTest, RefusesBytesThatAreNotUtf8) {
  for (absl::string_view name : {"a.txt", "a.md", "a.srt", "a.vtt", "a.html"}) {
    auto document = ReadDocument(name, "caf\xE9 con leche\n", {});
    EXPECT_EQ(document.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(document.status().message(), HasSubstr("not UTF-8")) << name;
  }
  const std::string utf16 = {'\xFF', '\xFE', '1', '\0', '\n', '\0'};  // "1\n", UTF-16LE
  EXPECT_THAT(ReadDocument("a.srt", utf16, {}).status().message(),
              HasSubstr("not UTF-8 text (it is UTF-16): save it as UTF-8"));
}

TEST(ReadDocumentTest, RefusesFilesOverTheLimits) {
  DocumentLimits limits;
  limits.max_bytes = 12;
  EXPECT_TRUE(ReadDocument("a.txt", "uno\ndos\ntres", limits).ok());  // 12 bytes
  auto big = ReadDocument("a.txt", "uno\ndos\ntres\n", limits);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(big.status().message(), HasSubstr("more than the limit of 12"));

  limits = DocumentLimits();
  limits.max_segments = 2;
  EXPECT_TRUE(ReadDocument("a.txt", "uno\ndos\n", limits).ok());
  const std::pair<absl::string_view, absl::string_view> files[] = {
      {"a.txt", "uno\ndos\ntres\n"},
      {"a.md", "# Uno\n\nDos\n\n- Tres\n"},
      {"a.srt", "1\n00:00:01,000 --> 00:00:02,000\n<i>uno</i> dos <b>tres</b>\n"},
      {"a.vtt",
       "WEBVTT\n\n00:01.000 --> 00:02.000\nuno\n\n00:02.000 --> 00:03.000\ndos\n\n"
       "00:03.000 --> 00:04.000\ntres\n"},
      {"a.html", "<p>uno</p><p>dos</p><p>tres</p>"}};
  for (const auto& [name, bytes] : files) {
    auto document = ReadDocument(name, std::string(bytes), limits);
    EXPECT_EQ(document.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(document.status().message(), HasSubstr("more than 2 segments")) << name;
  }
}

TEST(ReadDocumentTest, WriteWantsOneTranslationPerSegment) {
  for (absl::string_view name : {"a.txt", "a.html"}) {
    auto document = Read(name, "uno\n");
    ASSERT_NE(document, nullptr);
    EXPECT_EQ(document->Write({}).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(document->Write({"a", "b"}).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// Inputs built to make a careless reader quadratic: each format reads and writes a megabyte of
// them in a fraction of a second in a Release build (a quadratic reader would take many minutes);
// the bound leaves room for sanitizer builds on a loaded machine.
// A linear read of these inputs takes well under a second; a quadratic one (2^40 steps) would take
// hours. The bound leaves room for a busy machine and for ThreadSanitizer's slowdown (one input
// passed 10 s beside other tests there).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kLinearBoundSeconds = 60;
#else
constexpr double kLinearBoundSeconds = 10;
#endif

TEST(ReadDocumentTest, PathologicalInputsAreReadInLinearTime) {
  const size_t n = 1 << 20;
  std::string backticks;
  for (size_t i = 1; backticks.size() < n; ++i) backticks += std::string(i % 700, '`') + "a";
  const std::pair<absl::string_view, std::string> files[] = {
      {"a.md", std::string(n, '[')},
      {"a.md", absl::StrCat("a", std::string(n, '<'))},
      {"a.md", std::string(n / 2, '!') + std::string(n / 2, '[')},
      {"a.md", absl::StrReplaceAll(std::string(n / 4, 'x'), {{"x", "[a]("}})},
      {"a.md", backticks},
      {"a.md", std::string(n, '\n')},
      {"a.md", absl::StrReplaceAll(std::string(n / 2, 'x'), {{"x", "a\n"}})},
      {"a.srt",
       absl::StrCat("1\n0 --> 1\n", absl::StrReplaceAll(std::string(n / 2, 'x'), {{"x", "<a"}}))},
      {"a.vtt", absl::StrCat("WEBVTT\n\n0 --> 1\n", std::string(n, '{'))},
      {"a.srt",
       absl::StrCat("1\n0 --> 1\n", absl::StrReplaceAll(std::string(n / 2, 'x'), {{"x", "a\n"}}))},
      {"a.txt", std::string(n, ' ')},
  };
  for (const auto& [name, bytes] : files) {
    const auto start = std::chrono::steady_clock::now();
    auto document = Read(name, bytes);
    ASSERT_NE(document, nullptr);
    EXPECT_EQ(WriteOrDie(*document, document->texts()), bytes);
    (void)WriteOrDie(*document, Upper(document->texts()));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, kLinearBoundSeconds) << name << " " << bytes.substr(0, 20);
  }
}

}  // namespace
}  // namespace glossa::server
