#include "server/text/html_text.h"

#include <gumbo.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/big_stack.h"
#include "text/inline_tags.h"
#include "text/tokenizer.h"

namespace glossa::server {
namespace {

struct OutputDeleter {
  void operator()(GumboOutput* output) const {
    gumbo_destroy_output(&kGumboDefaultOptions, output);
  }
};

constexpr int64_t kMaxHtmlTags = 10000;

// Elements whose text is code or data, not prose.
bool KeepsItsText(GumboTag tag) {
  return tag == GUMBO_TAG_SCRIPT || tag == GUMBO_TAG_STYLE || tag == GUMBO_TAG_CODE ||
         tag == GUMBO_TAG_PRE || tag == GUMBO_TAG_TEXTAREA || tag == GUMBO_TAG_NOSCRIPT;
}

// Elements inside a sentence whose text is prose: a placeholder pair around it.
bool IsInline(GumboTag tag) {
  switch (tag) {
    case GUMBO_TAG_A:
    case GUMBO_TAG_ABBR:
    case GUMBO_TAG_B:
    case GUMBO_TAG_BDI:
    case GUMBO_TAG_BDO:
    case GUMBO_TAG_BIG:
    case GUMBO_TAG_CITE:
    case GUMBO_TAG_DATA:
    case GUMBO_TAG_DEL:
    case GUMBO_TAG_DFN:
    case GUMBO_TAG_EM:
    case GUMBO_TAG_FONT:
    case GUMBO_TAG_I:
    case GUMBO_TAG_INS:
    case GUMBO_TAG_LABEL:
    case GUMBO_TAG_MARK:
    case GUMBO_TAG_Q:
    case GUMBO_TAG_S:
    case GUMBO_TAG_SMALL:
    case GUMBO_TAG_SPAN:
    case GUMBO_TAG_STRIKE:
    case GUMBO_TAG_STRONG:
    case GUMBO_TAG_SUB:
    case GUMBO_TAG_SUP:
    case GUMBO_TAG_TIME:
    case GUMBO_TAG_TT:
    case GUMBO_TAG_U:
      return true;
    default:
      return false;
  }
}

// Elements inside a sentence kept whole as one empty element: images, code.
bool IsInlinePoint(GumboTag tag) {
  return tag == GUMBO_TAG_IMG || tag == GUMBO_TAG_WBR || tag == GUMBO_TAG_CODE ||
         tag == GUMBO_TAG_KBD || tag == GUMBO_TAG_SAMP || tag == GUMBO_TAG_VAR;
}

// Whether an element's end tag in the source is its own ("</b>"): the parser gives an element
// closed by another's end tag ("<p>Sin <b>cerrar</p>") that tag.
bool ClosesItself(const GumboElement& e) {
  const absl::string_view end(e.original_end_tag.data, e.original_end_tag.length);
  const absl::string_view name = gumbo_normalized_tagname(e.tag);
  return end.size() > name.size() + 2 && end.substr(0, 2) == "</" &&
         absl::EqualsIgnoreCase(end.substr(2, name.size()), name) &&
         (end[2 + name.size()] == '>' || absl::ascii_isspace(end[2 + name.size()]));
}

bool IsTextNode(const GumboNode* node) {
  return node->type == GUMBO_NODE_TEXT || node->type == GUMBO_NODE_WHITESPACE;
}

// Where a node's source is, [begin, end), within the HTML's `size` bytes; {0, 0} when the parser
// made it up (an implied tag).
std::pair<size_t, size_t> SourceOf(const GumboNode* node, size_t size) {
  std::pair<size_t, size_t> source = {0, 0};
  if (node->type == GUMBO_NODE_ELEMENT) {
    const GumboElement& e = node->v.element;
    const size_t begin = e.start_pos.offset;
    if (e.original_tag.length > 0 && e.original_end_tag.length > 0) {
      source = {begin, e.end_pos.offset + e.original_end_tag.length};
    } else if (e.original_tag.length > 0 && e.children.length == 0) {
      source = {begin, begin + e.original_tag.length};
    }
  } else if (node->type != GUMBO_NODE_DOCUMENT && node->type != GUMBO_NODE_TEMPLATE) {
    const GumboText& t = node->v.text;
    source = {t.start_pos.offset, t.start_pos.offset + t.original_text.length};
  }
  return source.second <= size ? source : std::make_pair(size_t{0}, size_t{0});
}

const GumboVector* ChildrenOf(const GumboNode* node) {
  if (node->type == GUMBO_NODE_DOCUMENT) return &node->v.document.children;
  if (node->type == GUMBO_NODE_ELEMENT || node->type == GUMBO_NODE_TEMPLATE) {
    return &node->v.element.children;
  }
  return nullptr;
}

// An element's name, lower-case: gumbo's for the elements it knows, else as written.
std::string TagName(const GumboElement& e) {
  if (e.tag != GUMBO_TAG_UNKNOWN) return gumbo_normalized_tagname(e.tag);
  const absl::string_view tag(e.original_tag.data, e.original_tag.length);
  size_t end = 1;
  while (end < tag.size() && !absl::ascii_isspace(static_cast<unsigned char>(tag[end])) &&
         tag[end] != '/' && tag[end] != '>') {
    ++end;
  }
  return absl::AsciiStrToLower(tag.substr(std::min<size_t>(1, tag.size()), end - 1));
}

// The HTML's text in runs of text and inline elements. Depth first, in document order; the
// parser runs on a thread with a stack for the deepest nesting allowed (ExtractHtmlText).
class Collector {
 public:
  Collector(absl::string_view html, const std::set<std::string>& ignore, HtmlText* out)
      : html_(html), ignore_(ignore), out_(out) {}

  void Block(const GumboNode* node) {
    const GumboVector* children = ChildrenOf(node);
    if (children == nullptr) return;
    for (unsigned i = 0; i < children->length; ++i) {
      const auto* child = static_cast<const GumboNode*>(children->data[i]);
      const auto [begin, end] = SourceOf(child, html_.size());
      const bool in_run = begin < end && (IsTextNode(child) || child->type == GUMBO_NODE_COMMENT ||
                                          InSentence(child));
      if (!in_run) {
        Flush();
        if (child->type == GUMBO_NODE_ELEMENT &&
            (KeepsItsText(child->v.element.tag) || Ignored(child))) {
          continue;
        }
        Block(child);
        continue;
      }
      if (begin != run_end_) Flush();
      if (run_nodes_.empty()) run_begin_ = begin;
      Emit(child);
      run_end_ = end;
    }
    Flush();
  }

 private:
  // Whether an element is one of ignore_tags: kept whole, never translated.
  bool Ignored(const GumboNode* node) const {
    return !ignore_.empty() && node->type == GUMBO_NODE_ELEMENT &&
           ignore_.count(TagName(node->v.element)) > 0;
  }

  // Whether an element can stand in a sentence: inline, with all its source's tags, its
  // children inline too and contiguous (the parser moves misplaced content).
  bool InSentence(const GumboNode* node) {
    if (node->type != GUMBO_NODE_ELEMENT) return false;
    auto [memo, fresh] = in_sentence_.try_emplace(node, false);
    if (!fresh) return memo->second;
    const GumboElement& e = node->v.element;
    const auto [begin, end] = SourceOf(node, html_.size());
    bool ok = begin < end;
    if (ok && (IsInlinePoint(e.tag) || Ignored(node))) return in_sentence_[node] = true;
    ok = ok && IsInline(e.tag) && ClosesItself(e);
    size_t pos = begin + e.original_tag.length;
    for (unsigned i = 0; ok && i < e.children.length; ++i) {
      const auto* child = static_cast<const GumboNode*>(e.children.data[i]);
      const auto [b, en] = SourceOf(child, html_.size());
      ok = b == pos && b < en &&
           (IsTextNode(child) || child->type == GUMBO_NODE_COMMENT || InSentence(child));
      pos = en;
    }
    ok = ok && pos == e.end_pos.offset;
    return in_sentence_[node] = ok;
  }

  // Appends a node of a run.
  void Emit(const GumboNode* node) {
    const auto [begin, end] = SourceOf(node, html_.size());
    if (IsTextNode(node)) {
      run_.Text(node->v.text.text);
      run_nodes_.push_back(node);
      return;
    }
    const std::string source(html_.substr(begin, end - begin));
    const GumboElement* e = node->type == GUMBO_NODE_ELEMENT ? &node->v.element : nullptr;
    if (e == nullptr || IsInlinePoint(e->tag) || Ignored(node)) {
      run_.Point(source);
      run_nodes_.push_back(nullptr);
      return;
    }
    const int id = run_.Open(std::string(e->original_tag.data, e->original_tag.length),
                             std::string(e->original_end_tag.data, e->original_end_tag.length));
    for (unsigned i = 0; i < e->children.length; ++i) {
      Emit(static_cast<const GumboNode*>(e->children.data[i]));
    }
    run_.Close(id);
  }

  // The run as a text to translate: one text with placeholders, or each of its text nodes
  // alone when it has more elements than a request takes.
  void Flush() {
    if (!run_nodes_.empty() && !IsBlank(run_.plain()) &&
        (out_->spans.empty() || out_->spans.back().second <= run_begin_)) {
      if (run_.elements() <= kMaxInlineTags) {
        Add(run_.text(), {run_begin_, run_end_}, run_.markup());
      } else {
        for (const GumboNode* node : run_nodes_) {
          if (node == nullptr || IsBlank(node->v.text.text)) continue;
          const auto [begin, end] = SourceOf(node, html_.size());
          PlaceholderText alone;
          alone.Text(node->v.text.text);
          Add(alone.text(), {begin, end}, {});
        }
      }
    }
    run_ = PlaceholderText();
    run_nodes_.clear();
    run_end_ = 0;
  }

  static bool IsBlank(absl::string_view text) {
    return std::all_of(text.begin(), text.end(),
                       [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); });
  }

  void Add(std::string text, std::pair<size_t, size_t> span, std::vector<Markup> markup) {
    out_->texts.push_back(std::move(text));
    out_->spans.push_back(span);
    out_->markup.push_back(std::move(markup));
  }

  const absl::string_view html_;
  const std::set<std::string>& ignore_;
  HtmlText* const out_;
  absl::flat_hash_map<const GumboNode*, bool> in_sentence_;
  PlaceholderText run_;
  std::vector<const GumboNode*> run_nodes_;  // its text nodes; nullptr for its empty elements
  size_t run_begin_ = 0, run_end_ = 0;
};

}  // namespace

absl::StatusOr<HtmlText> ExtractHtmlText(absl::string_view html,
                                         const std::set<std::string>& ignore_tags) {
  if (!IsValidUtf8(html)) return absl::InvalidArgumentError("the HTML is not valid UTF-8");
  // Bounds the nesting depth (at most one level a tag) for the stack below.
  if (std::count(html.begin(), html.end(), '<') > kMaxHtmlTags) {
    return absl::InvalidArgumentError(
        absl::StrCat("the HTML has more than ", kMaxHtmlTags, " tags: send it in parts"));
  }
  // gumbo builds and frees its tree recursively, a few hundred bytes of stack a nesting level:
  // more than an HTTP thread has (measured: civetweb's threads overflowed at 4000 nested
  // tags), so it runs on a thread with a stack for the deepest nesting allowed.
  HtmlText out;
  bool parsed = false;
  const absl::Status ran = RunWithStack(size_t{64} << 20, [&] {
    std::unique_ptr<GumboOutput, OutputDeleter> output(
        gumbo_parse_with_options(&kGumboDefaultOptions, html.data(), html.size()));
    if (output == nullptr) return;
    Collector(html, ignore_tags, &out).Block(output->document);
    parsed = true;
  });
  if (!ran.ok()) return absl::Status(ran.code(), absl::StrCat("parsing the HTML: ", ran.message()));
  if (!parsed) return absl::InvalidArgumentError("the HTML cannot be parsed");
  return out;
}

std::string ReplaceHtmlText(absl::string_view html, const HtmlText& text,
                            const std::vector<std::string>& translations) {
  std::string out;
  size_t pos = 0;
  for (size_t i = 0; i < text.spans.size() && i < translations.size(); ++i) {
    const auto [begin, end] = text.spans[i];
    const std::vector<Markup> none;
    absl::StrAppend(&out, html.substr(pos, begin - pos),
                    WriteMarkup(translations[i], i < text.markup.size() ? text.markup[i] : none));
    pos = end;
  }
  absl::StrAppend(&out, html.substr(pos));
  return out;
}

}  // namespace glossa::server
