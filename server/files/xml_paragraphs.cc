#include "server/files/xml_paragraphs.h"

#include <algorithm>
#include <map>
#include <pugixml.hpp>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/big_stack.h"
#include "server/documents/segments.h"
#include "server/text/placeholders.h"
#include "text/inline_tags.h"
#include "text/tokenizer.h"

namespace glossa::server {
namespace {

constexpr unsigned kParse = pugi::parse_full | pugi::parse_ws_pcdata;
constexpr int kMaxDepth = 256;

// A text to translate: a paragraph with its markup, or one text node.
struct Unit {
  pugi::xml_node node;
  bool paragraph = false;
  PlaceholderText text;
  std::vector<bool> formatting;  // runs: each element's kind (properties, not a link or a point)
  std::string base;              // runs: the paragraph's base properties
  bool direct = false;           // runs: the paragraph holds its text element directly
};

bool Contains(const std::vector<std::string>& names, const char* name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool IsText(pugi::xml_node node) {
  return node.type() == pugi::node_pcdata || node.type() == pugi::node_cdata;
}

std::string Serialize(pugi::xml_node node) {
  std::ostringstream out;
  node.print(out, "", pugi::format_raw);
  return out.str();
}

std::string EscapeAttribute(absl::string_view value) {
  std::string out;
  for (char c : value) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string StartTag(pugi::xml_node node) {
  std::string out = absl::StrCat("<", node.name());
  for (pugi::xml_attribute a : node.attributes()) {
    absl::StrAppend(&out, " ", a.name(), "=\"", EscapeAttribute(a.value()), "\"");
  }
  return out + ">";
}

std::string EndTag(pugi::xml_node node) { return absl::StrCat("</", node.name(), ">"); }

// The formatting (properties, a span's start tag) that holds the most text; "" for none.
std::string MostUsed(const std::map<std::string, size_t>& chars) {
  std::string most;
  size_t n = 0;
  for (const auto& [formatting, count] : chars) {
    if (count > n) most = formatting, n = count;
  }
  return most;
}

bool IsParagraph(const XmlDialect& d, const char* name) {
  return d.paragraph == name || (!d.heading.empty() && d.heading == name);
}

bool HasParagraphInside(const XmlDialect& d, pugi::xml_node node) {
  return node.find_node([&](pugi::xml_node n) { return IsParagraph(d, n.name()); }) != nullptr;
}

class Collector {
 public:
  explicit Collector(const XmlDialect& dialect) : d_(dialect) {}

  std::vector<Unit> Collect(pugi::xml_node root) {
    Walk(root, false);
    return std::move(units_);
  }

 private:
  void Walk(pugi::xml_node node, bool in_paragraph) {
    for (pugi::xml_node child : node.children()) {
      if (IsText(child)) {
        const bool text = d_.run.empty() ? in_paragraph : d_.text == node.name();
        if (text && in_paragraph && HasLetter(child.value())) Single(child);
        continue;
      }
      const bool paragraph = IsParagraph(d_, child.name());
      if (paragraph && !HasParagraphInside(d_, child) && Paragraph(child)) continue;
      Walk(child, in_paragraph || paragraph);
    }
  }

  void Single(pugi::xml_node node) {
    Unit unit;
    unit.node = node;
    unit.text.Text(node.value());
    units_.push_back(std::move(unit));
  }

  // The paragraph as one unit; false when it goes node by node (or has no text to translate).
  bool Paragraph(pugi::xml_node p) {
    Unit unit;
    unit.node = p;
    unit.paragraph = true;
    if (!(d_.run.empty() ? MixedParagraph(p, &unit) : Runs(p, &unit))) return false;
    if (HasLetter(unit.text.plain())) units_.push_back(std::move(unit));
    return true;
  }

  // A mixed paragraph's top level: its most used span style (by text, bare text included) is its
  // base, left out of the placeholders; consecutive spans of one other style are one element.
  bool MixedParagraph(pugi::xml_node p, Unit* unit) {
    std::map<std::string, size_t> chars;
    for (pugi::xml_node child : p.children()) {
      const bool span = d_.style_element == child.name();
      chars[span ? StartTag(child) : ""] += TextLength(child);
    }
    unit->base = MostUsed(chars);
    int open = -1;
    std::string open_style;
    for (pugi::xml_node child : p.children()) {
      const std::string style = d_.style_element == child.name() ? StartTag(child) : "";
      if (style.empty() || style != open_style) {
        if (open >= 0) unit->text.Close(open);
        open = -1;
        open_style.clear();
      }
      if (style.empty()) {
        if (!MixedChild(child, unit)) return false;
        continue;
      }
      if (style != unit->base && open < 0) {
        open = unit->text.Open(style, EndTag(child));
        open_style = style;
      }
      if (!Mixed(child, unit)) return false;
    }
    if (open >= 0) unit->text.Close(open);
    return unit->text.elements() <= kMaxInlineTags;
  }

  static size_t TextLength(pugi::xml_node node) {
    if (IsText(node)) return strlen(node.value());
    size_t n = 0;
    for (pugi::xml_node child : node.children()) n += TextLength(child);
    return n;
  }

  bool Mixed(pugi::xml_node node, Unit* unit) {
    for (pugi::xml_node child : node.children()) {
      if (!MixedChild(child, unit)) return false;
    }
    return unit->text.elements() <= kMaxInlineTags;
  }

  bool MixedChild(pugi::xml_node child, Unit* unit) {
    {
      if (IsText(child)) {
        unit->text.Text(child.value());
      } else if (Contains(d_.complex, child.name())) {
        return false;
      } else if (d_.spaces == child.name()) {  // text:s, c="3": three spaces
        unit->text.Text(std::string(std::clamp(child.attribute("text:c").as_int(1), 1, 1000), ' '));
      } else if (child.type() == pugi::node_element && Contains(d_.inline_elements, child.name())) {
        const int id = unit->text.Open(StartTag(child), EndTag(child));
        if (!Mixed(child, unit)) return false;
        unit->text.Close(id);
      } else {
        unit->text.Point(Serialize(child));
      }
    }
    return true;
  }

  // Whether a paragraph of runs can be rewritten, and its base properties (most text).
  bool Base(pugi::xml_node p, std::string* base) {
    std::map<std::string, size_t> chars;
    for (pugi::xml_node child : p.children()) {
      if (Contains(d_.complex, child.name())) return false;
      const bool link = !d_.link.empty() && d_.link == child.name();
      auto count = [&](pugi::xml_node run) {
        if (d_.run != run.name()) return;
        const std::string props = Serialize(run.child(d_.run_properties.c_str()));
        for (pugi::xml_node c : run.children(d_.text.c_str())) {
          chars[props] += strlen(c.text().get());
        }
      };
      if (link) {
        for (pugi::xml_node run : child.children()) {
          if (run.type() == pugi::node_element && d_.run != run.name() &&
              !Contains(d_.dropped, run.name())) {
            return false;  // a link around more than runs
          }
          count(run);
        }
      } else {
        count(child);
      }
    }
    *base = MostUsed(chars);
    return true;
  }

  bool Runs(pugi::xml_node p, Unit* unit) {
    if (!Base(p, &unit->base)) return false;
    int open = -1;
    std::string open_props;
    auto format = [&](const std::string& props) {
      if (open >= 0 && props == open_props) return;
      if (open >= 0) unit->text.Close(open);
      open = -1;
      if (props == unit->base) return;
      open = unit->text.Open(props, "");
      unit->formatting.push_back(true);
      open_props = props;
    };
    auto point = [&](std::string bytes) {
      unit->text.Point(std::move(bytes));
      unit->formatting.push_back(false);
    };
    auto run = [&](pugi::xml_node r) {
      const pugi::xml_node rpr = r.child(d_.run_properties.c_str());
      const std::string props = Serialize(rpr);
      for (pugi::xml_node c : r.children()) {
        if (c == rpr || c.type() != pugi::node_element) continue;
        if (d_.text == c.name()) {
          format(props);
          unit->text.Text(c.text().get());
        } else {
          point(absl::StrCat("<", d_.run, ">", props, Serialize(c), "</", d_.run, ">"));
        }
      }
    };
    for (pugi::xml_node child : p.children()) {
      const char* name = child.name();
      if (child.type() != pugi::node_element || Contains(d_.dropped, name) ||
          d_.paragraph_start == name || d_.paragraph_end == name) {
        continue;
      }
      if (d_.run == name) {
        run(child);
      } else if (d_.text == name) {
        format(unit->base);
        unit->text.Text(child.text().get());
        unit->direct = true;
      } else if (!d_.link.empty() && d_.link == name) {
        format(unit->base);
        const int id = unit->text.Open(StartTag(child), EndTag(child));
        unit->formatting.push_back(false);
        for (pugi::xml_node r : child.children(d_.run.c_str())) run(r);
        format(unit->base);
        unit->text.Close(id);
      } else {
        format(unit->base);  // a break or a bookmark between runs: outside their formatting
        point(Serialize(child));
      }
    }
    format(unit->base);
    return unit->text.elements() <= kMaxInlineTags;
  }

  const XmlDialect& d_;
  std::vector<Unit> units_;
};

// A translated paragraph of runs as XML: each piece of text a run with its element's properties.
std::string WriteRuns(const XmlDialect& d, const Unit& unit, absl::string_view translation) {
  const std::vector<Markup>& markup = unit.text.markup();
  const std::string text_start =
      absl::StrCat("<", d.text, d.preserve_space ? " xml:space=\"preserve\">" : ">");
  const std::string text_end = absl::StrCat("</", d.text, ">");
  std::string out;
  std::vector<int> open;
  for (const PlaceholderEvent& e : ReadPlaceholders(translation, markup)) {
    if (e.kind == PlaceholderEvent::kText) {
      if (unit.direct) {
        absl::StrAppend(&out, text_start, EscapeXmlText(e.text), text_end);
        continue;
      }
      std::string props = unit.base;
      for (auto it = open.rbegin(); it != open.rend(); ++it) {
        if (unit.formatting[*it]) {
          props = markup[*it].start;
          break;
        }
      }
      absl::StrAppend(&out, "<", d.run, ">", props, text_start, EscapeXmlText(e.text), text_end,
                      "</", d.run, ">");
    } else if (e.kind == PlaceholderEvent::kPoint) {
      out += markup[e.id].start;
    } else if (e.kind == PlaceholderEvent::kOpen) {
      open.push_back(e.id);
      if (!unit.formatting[e.id]) out += markup[e.id].start;
    } else {
      open.pop_back();
      if (!unit.formatting[e.id]) out += markup[e.id].end;
    }
  }
  return out;
}

// A translated mixed paragraph as XML: its text outside the elements in the base style's span.
std::string WriteMixed(const XmlDialect& d, const Unit& unit, absl::string_view translation) {
  const std::vector<Markup>& markup = unit.text.markup();
  if (unit.base.empty()) return WriteMarkup(translation, markup);
  std::string out;
  int depth = 0;
  for (const PlaceholderEvent& e : ReadPlaceholders(translation, markup)) {
    if (e.kind == PlaceholderEvent::kText) {
      const std::string text = EscapeXmlText(e.text);
      out += depth > 0 ? text : absl::StrCat(unit.base, text, "</", d.style_element, ">");
    } else if (e.kind == PlaceholderEvent::kPoint) {
      out += markup[e.id].start;
    } else if (e.kind == PlaceholderEvent::kOpen) {
      ++depth;
      out += markup[e.id].start;
    } else {
      --depth;
      out += markup[e.id].end;
    }
  }
  return out;
}

// Replaces a paragraph's content (but its first and last properties) with `xml`.
bool Rewrite(const XmlDialect& d, pugi::xml_node p, const std::string& xml) {
  pugi::xml_node end =
      d.paragraph_end.empty() ? pugi::xml_node() : p.child(d.paragraph_end.c_str());
  for (pugi::xml_node child = p.first_child(); child;) {
    pugi::xml_node next = child.next_sibling();
    const bool start =
        !d.paragraph_start.empty() && d.paragraph_start == child.name() && child == p.first_child();
    if (child != end && !start) {
      p.remove_child(child);
    }
    child = next;
  }
  // Text alone parses with "no document element", and is appended all the same.
  const pugi::xml_parse_result result =
      p.append_buffer(xml.data(), xml.size(), kParse, pugi::encoding_utf8);
  if (!result && result.status != pugi::status_no_document_element) return false;
  if (end) p.append_move(end);
  return true;
}

struct Parsed {
  pugi::xml_document doc;
  std::vector<Unit> units;
};

absl::Status Parse(absl::string_view xml, const XmlDialect& dialect, absl::string_view what,
                   Parsed* out) {
  const pugi::xml_parse_result result =
      out->doc.load_buffer(xml.data(), xml.size(), kParse, pugi::encoding_utf8);
  if (!result) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is not well-formed XML: ", result.description(), " at byte ", result.offset));
  }
  for (pugi::xml_node child : out->doc.children()) {
    if (child.type() == pugi::node_doctype) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " declares a DTD (<!DOCTYPE>), which office documents never do: refused"));
    }
  }
  struct Depth : pugi::xml_tree_walker {
    int deepest = 0;
    bool for_each(pugi::xml_node&) override {
      deepest = std::max(deepest, depth());
      return deepest <= kMaxDepth;
    }
  } depth;
  out->doc.traverse(depth);
  if (depth.deepest > kMaxDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " nests elements deeper than ", kMaxDepth));
  }
  out->units = Collector(dialect).Collect(out->doc);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ReadParagraphs(absl::string_view xml,
                                                        const XmlDialect& dialect,
                                                        absl::string_view what) {
  Parsed parsed;
  if (absl::Status s = Parse(xml, dialect, what, &parsed); !s.ok()) return s;
  std::vector<std::string> out;
  for (const Unit& unit : parsed.units) out.push_back(unit.text.text());
  return out;
}

absl::StatusOr<std::string> WriteParagraphs(absl::string_view xml, const XmlDialect& dialect,
                                            const std::vector<std::string>& translations) {
  Parsed parsed;
  if (absl::Status s = Parse(xml, dialect, "the XML", &parsed); !s.ok()) return s;
  if (translations.size() != parsed.units.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the XML has ", parsed.units.size(), " texts, not ", translations.size()));
  }
  bool changed = false;
  for (size_t i = 0; i < translations.size(); ++i) {
    const Unit& unit = parsed.units[i];
    if (translations[i] == unit.text.text()) continue;
    changed = true;
    if (!unit.paragraph) {
      pugi::xml_node node = unit.node;
      node.set_value(PlainText(translations[i]).c_str());
      continue;
    }
    const std::string content = dialect.run.empty() ? WriteMixed(dialect, unit, translations[i])
                                                    : WriteRuns(dialect, unit, translations[i]);
    if (!Rewrite(dialect, unit.node, content)) {
      return absl::InternalError("a translated paragraph is not well-formed XML");
    }
  }
  if (!changed) return std::string(xml);
  std::ostringstream out;
  parsed.doc.save(out, "", pugi::format_raw | pugi::format_no_declaration, pugi::encoding_utf8);
  return out.str();
}

}  // namespace

const XmlDialect& WordDialect() {
  static const XmlDialect* d = [] {
    auto* w = new XmlDialect;
    w->paragraph = "w:p";
    w->run = "w:r";
    w->run_properties = "w:rPr";
    w->text = "w:t";
    w->paragraph_start = "w:pPr";
    w->link = "w:hyperlink";
    w->dropped = {"w:proofErr", "w:lastRenderedPageBreak"};
    w->complex = {"w:ins",   "w:del",       "w:moveFrom",  "w:moveTo",
                  "w:sdt",   "w:smartTag",  "w:customXml", "w:fldSimple",
                  "m:oMath", "m:oMathPara", "w:ruby",      "mc:AlternateContent"};
    return w;
  }();
  return *d;
}

const XmlDialect& DrawingDialect() {
  static const XmlDialect* d = [] {
    auto* a = new XmlDialect;
    a->paragraph = "a:p";
    a->run = "a:r";
    a->run_properties = "a:rPr";
    a->text = "a:t";
    a->paragraph_start = "a:pPr";
    a->paragraph_end = "a:endParaRPr";
    a->preserve_space = false;
    return a;
  }();
  return *d;
}

const XmlDialect& SpreadsheetDialect() {
  static const XmlDialect* d = [] {
    auto* x = new XmlDialect;
    x->paragraph = "si";
    x->heading = "is";
    x->run = "r";
    x->run_properties = "rPr";
    x->text = "t";
    x->complex = {"rPh", "phoneticPr"};
    return x;
  }();
  return *d;
}

const XmlDialect& OpenDocumentDialect() {
  static const XmlDialect* d = [] {
    auto* o = new XmlDialect;
    o->paragraph = "text:p";
    o->heading = "text:h";
    o->preserve_space = false;
    o->inline_elements = {"text:span", "text:a"};
    o->complex = {"text:note", "office:annotation", "draw:frame", "text:ruby", "text:meta"};
    o->spaces = "text:s";
    o->style_element = "text:span";
    return o;
  }();
  return *d;
}

// The walks recurse as deep as the XML nests (within kMaxDepth): on a thread with room for it.
constexpr size_t kStackBytes = size_t{64} << 20;

absl::StatusOr<std::vector<std::string>> ReadXmlParagraphs(absl::string_view xml,
                                                           const XmlDialect& dialect,
                                                           absl::string_view what) {
  absl::StatusOr<std::vector<std::string>> out;
  const absl::Status ran =
      RunWithStack(kStackBytes, [&] { out = ReadParagraphs(xml, dialect, what); });
  if (!ran.ok()) return absl::Status(ran.code(), absl::StrCat("reading the XML: ", ran.message()));
  return out;
}

absl::StatusOr<std::string> WriteXmlParagraphs(absl::string_view xml, const XmlDialect& dialect,
                                               const std::vector<std::string>& translations) {
  absl::StatusOr<std::string> out;
  const absl::Status ran =
      RunWithStack(kStackBytes, [&] { out = WriteParagraphs(xml, dialect, translations); });
  if (!ran.ok()) return absl::Status(ran.code(), absl::StrCat("writing the XML: ", ran.message()));
  return out;
}

}  // namespace glossa::server
