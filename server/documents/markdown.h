// Markdown (CommonMark and GitHub's tables), read line by line as CommonMark's block structure
// is: the text of paragraphs, headings, list items, blockquotes and table cells is translated;
// everything else is kept byte for byte: fenced (``` and ~~~) and indented code blocks, HTML
// blocks, link reference definitions, thematic breaks, YAML front matter, and the syntax around
// text (heading marks, list markers and task boxes, '>' markers, table pipes and delimiter rows).
//
// A paragraph's lines are one segment, joined with spaces: a sentence that wraps is translated
// whole, and the translation is written back on as many lines as the paragraph had, with the
// source's line breaks and continuation markers (such as "> ") between them (segments.h). A
// heading and a table cell are segments of their own.
//
// Inline markup ends the segment before it and is kept as it is: code spans, a link's or image's
// destination ("[the text](url)": "the text" is a segment, "(url)" is kept; so is "[ref]" of
// "[text][ref]"), autolinks, inline HTML tags and bare http(s) URLs. Emphasis marks (*, _) and
// backslash escapes are part of the text.
//
// The block structure is read the way CommonMark does for common files, not to the letter:
// lists nest by indentation only roughly, code spans end on their line, and a link's text holds
// no brackets. What is not recognised as markup is translated as text; every byte is kept either
// way.
#ifndef GLOSSA_SERVER_DOCUMENTS_MARKDOWN_H_
#define GLOSSA_SERVER_DOCUMENTS_MARKDOWN_H_

#include "absl/strings/string_view.h"
#include "server/documents/segments.h"

namespace glossa::server {

// The segments of the Markdown in source[from..].
void ReadMarkdown(absl::string_view source, size_t from, SegmentBuilder* out);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_DOCUMENTS_MARKDOWN_H_
