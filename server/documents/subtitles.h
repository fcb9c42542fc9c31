// Subtitles: SubRip (.srt) and WebVTT (.vtt). Each cue's text is one segment, its lines joined
// with spaces: a sentence often runs over a cue's two lines, and translated line by line it
// would come back as two half sentences. The translation is written back on as many lines as
// the cue had (segments.h says where they break). Cue numbers and identifiers, timing lines
// with their settings, the WEBVTT header and NOTE, STYLE and REGION blocks are kept byte for
// byte; a block without a timing line ("-->") is kept too.
//
// Inline tags (<i>, </b>, <c.yellow>, <v Roger>, <00:01.500>, SubRip's {\an8}) are not text:
// each ends the segment before it, so none is lost or repeated, and a cue such as
// "<i>Hola</i>" has the segment "Hola".
#ifndef GLOSSA_SERVER_DOCUMENTS_SUBTITLES_H_
#define GLOSSA_SERVER_DOCUMENTS_SUBTITLES_H_

#include "absl/strings/string_view.h"
#include "server/documents/segments.h"

namespace glossa::server {

// The segments of the subtitles in source[from..]; `webvtt` reads the WebVTT header and blocks.
void ReadSubtitles(absl::string_view source, size_t from, bool webvtt, SegmentBuilder* out);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_DOCUMENTS_SUBTITLES_H_
