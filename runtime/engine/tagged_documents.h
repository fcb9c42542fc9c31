// Texts with inline tags (text/inline_tags.h) through translation: each text is translated
// without its tags, and the tags are written on its translation where text/markup.h places them,
// whether the text was translated whole or sentence by sentence (engine/document.h).
#ifndef GLOSSA_RUNTIME_ENGINE_TAGGED_DOCUMENTS_H_
#define GLOSSA_RUNTIME_ENGINE_TAGGED_DOCUMENTS_H_

#include <vector>

#include "engine/document.h"
#include "engine/model.h"
#include "engine/text_job.h"
#include "text/inline_tags.h"

namespace glossa {

// One Translation per text of `tagged`, each hypothesis's text with the tags written in. The
// translations are one per text, or with `documents` (the split of the tagged texts' text) one
// per sentence, joined here as JoinDocuments joins them; their hypotheses need the alignment and
// attention (SearchOptions::alignment). language_token: the source language token the sources
// were encoded with (-1: none). A span of a document that runs over several sentences goes from
// its place in the first to its place in the last (a sentence it covers whole: that sentence's
// whole translation); an empty element between sentences keeps its place in the whitespace.
// Attention is dropped from the results; the alignment of a joined hypothesis too.
std::vector<Translation> WriteTags(const Model& model, int language_token,
                                   const std::vector<TaggedText>& tagged,
                                   const Documents* documents,
                                   std::vector<Translation> translations);

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_ENGINE_TAGGED_DOCUMENTS_H_
