#include "text/languages.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace glossa {
namespace {

// ISO 639-1 -> 639-3 (the macrolanguage where there is one); the converter has the same table
// (model_tools/glossa_families.py) and writes each multilingual code's aliases into the file.
constexpr char kIso639[] =
    "aa:aar ab:abk af:afr ak:aka am:amh an:arg ar:ara as:asm av:ava ay:aym az:aze ba:bak be:bel "
    "bg:bul bi:bis bm:bam bn:ben bo:bod br:bre bs:bos ca:cat ce:che ch:cha co:cos cr:cre cs:ces "
    "cu:chu cv:chv cy:cym da:dan de:deu dv:div dz:dzo ee:ewe el:ell en:eng eo:epo es:spa et:est "
    "eu:eus fa:fas ff:ful fi:fin fj:fij fo:fao fr:fra fy:fry ga:gle gd:gla gl:glg gn:grn gu:guj "
    "gv:glv ha:hau he:heb hi:hin ho:hmo hr:hrv ht:hat hu:hun hy:hye hz:her ia:ina id:ind ie:ile "
    "ig:ibo ii:iii ik:ipk io:ido is:isl it:ita iu:iku ja:jpn jv:jav ka:kat kg:kon ki:kik kj:kua "
    "kk:kaz kl:kal km:khm kn:kan ko:kor kr:kau ks:kas ku:kur kv:kom kw:cor ky:kir la:lat lb:ltz "
    "lg:lug li:lim ln:lin lo:lao lt:lit lu:lub lv:lav mg:mlg mh:mah mi:mri mk:mkd ml:mal mn:mon "
    "mr:mar ms:msa mt:mlt my:mya na:nau nb:nob nd:nde ne:nep ng:ndo nl:nld nn:nno no:nor nr:nbl "
    "nv:nav ny:nya oc:oci oj:oji om:orm or:ori os:oss pa:pan pi:pli pl:pol ps:pus pt:por qu:que "
    "rm:roh rn:run ro:ron ru:rus rw:kin sa:san sc:srd sd:snd se:sme sg:sag si:sin sk:slk sl:slv "
    "sm:smo sn:sna so:som sq:sqi sr:srp ss:ssw st:sot su:sun sv:swe sw:swa ta:tam te:tel tg:tgk "
    "th:tha ti:tir tk:tuk tl:tgl tn:tsn to:ton tr:tur ts:tso tt:tat tw:twi ty:tah ug:uig uk:ukr "
    "ur:urd uz:uzb ve:ven vi:vie vo:vol wa:wln wo:wol xh:xho yi:yid yo:yor za:zha zh:zho zu:zul";

const absl::flat_hash_map<std::string, std::string>& IsoTable() {
  static const auto* table = [] {
    auto* t = new absl::flat_hash_map<std::string, std::string>();
    for (absl::string_view pair : absl::StrSplit(kIso639, ' ')) {
      std::pair<std::string, std::string> kv = absl::StrSplit(pair, ':');
      t->emplace(kv.first, kv.second);
    }
    return t;
  }();
  return *table;
}

std::string Codes(const std::vector<LanguageCode>& languages) {
  return absl::StrJoin(languages, ", ",
                       [](std::string* out, const LanguageCode& l) { out->append(l.code); });
}

// One of a multilingual model's languages, by code, token or unambiguous ISO code.
absl::StatusOr<const LanguageCode*> FindLanguage(const std::vector<LanguageCode>& languages,
                                                 const char* field, absl::string_view query) {
  for (const LanguageCode& l : languages) {
    if (l.code == query || l.token == query) return &l;
  }
  const std::string lower = absl::AsciiStrToLower(query);
  std::vector<const LanguageCode*> matches;
  for (const LanguageCode& l : languages) {
    if (absl::AsciiStrToLower(l.code) == lower) return &l;
    if (!lower.empty() && (l.iso639_1 == lower || l.iso639_3 == lower)) matches.push_back(&l);
  }
  if (matches.size() == 1) return matches.front();
  if (matches.size() > 1) {
    std::vector<LanguageCode> candidates;
    for (const LanguageCode* l : matches) candidates.push_back(*l);
    return absl::InvalidArgumentError(absl::StrCat(field, " '", query,
                                                   "' is ambiguous for this model: it may be ",
                                                   Codes(candidates), "; give one of these"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, " '", query,
                   "' is not a language of this model; its codes (ISO 639-1 and 639-3 "
                   "codes that name one of them are accepted too): ",
                   Codes(languages)));
}

bool SameLanguage(absl::string_view a, absl::string_view b) { return Iso639_3(a) == Iso639_3(b); }

// A bilingual model's side: empty, or its own language.
absl::Status CheckBilingual(const char* field, absl::string_view query, const std::string& own) {
  if (query.empty() || (!own.empty() && SameLanguage(query, own))) return absl::OkStatus();
  if (own.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " '", query, "': this model does not declare its languages; leave ",
                     field, " empty"));
  }
  return absl::InvalidArgumentError(absl::StrCat(field, " '", query,
                                                 "': this bilingual model only knows '", own,
                                                 "'; leave it empty or give '", own, "'"));
}

// The ">>fra<<" token among a Marian multi-target model's `tokens` that `query` names.
absl::StatusOr<std::string> MarianTargetToken(const std::vector<std::string>& tokens,
                                              absl::string_view query) {
  const std::string lower = absl::AsciiStrToLower(query);
  std::vector<std::string> matches;
  for (const std::string& token : tokens) {
    const std::string code = token.substr(2, token.size() - 4);
    if (token == query || code == query) return token;
    if (!lower.empty() && SameLanguage(lower, code)) matches.push_back(token);
  }
  if (matches.size() == 1) return matches.front();
  if (query.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("this model translates into several languages: set target_language to one of ",
                     absl::StrJoin(tokens, ", ")));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "target_language '", query, "' is ",
      matches.empty() ? "not a target language of this model" : "ambiguous for this model",
      "; give one of ", absl::StrJoin(matches.empty() ? tokens : matches, ", ")));
}

// What ResolveLanguages decides, with the Marian target token by name rather than by id.
struct ResolvedNames {
  const LanguageCode* source = nullptr;  // multilingual models
  const LanguageCode* target = nullptr;
  std::string marian_target;  // Marian multi-target models
};

absl::StatusOr<ResolvedNames> ResolveNames(const ModelInfo& info,
                                           const std::vector<std::string>& target_prefix_tokens,
                                           absl::string_view source_language,
                                           absl::string_view target_language) {
  ResolvedNames out;
  if (!info.languages.empty()) {
    if (source_language.empty() || target_language.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "this model is multilingual: set source_language and target_language (",
          source_language.empty() ? "source_language" : "target_language",
          " is missing); its codes (ISO 639-1 and 639-3 codes that name one of them are accepted "
          "too): ",
          Codes(info.languages)));
    }
    auto source = FindLanguage(info.languages, "source_language", source_language);
    if (!source.ok()) return source.status();
    auto target = FindLanguage(info.languages, "target_language", target_language);
    if (!target.ok()) return target.status();
    out.source = *source;
    out.target = *target;
    return out;
  }
  if (absl::Status s = CheckBilingual("source_language", source_language, info.source_language);
      !s.ok()) {
    return s;
  }
  if (!target_prefix_tokens.empty()) {
    auto token = MarianTargetToken(target_prefix_tokens, target_language);
    if (!token.ok()) return token.status();
    out.marian_target = *std::move(token);
    return out;
  }
  if (absl::Status s = CheckBilingual("target_language", target_language, info.target_language);
      !s.ok()) {
    return s;
  }
  return out;
}

}  // namespace

std::string Iso639_3(absl::string_view code) {
  std::string lower = absl::AsciiStrToLower(code);
  auto it = IsoTable().find(lower);
  return it == IsoTable().end() ? lower : it->second;
}

std::string Iso639_1(absl::string_view code) {
  static const auto* reverse = [] {
    auto* t = new absl::flat_hash_map<std::string, std::string>();
    for (const auto& [two, three] : IsoTable()) t->emplace(three, two);
    return t;
  }();
  std::string lower = absl::AsciiStrToLower(code);
  auto it = reverse->find(lower);
  return it == reverse->end() ? lower : it->second;
}

absl::StatusOr<LanguagePair> ResolveLanguages(const ModelInfo& info, const Tokenizer& tokenizer,
                                              absl::string_view source_language,
                                              absl::string_view target_language) {
  auto names =
      ResolveNames(info, tokenizer.target_prefix_tokens(), source_language, target_language);
  if (!names.ok()) return names.status();
  LanguagePair pair;
  if (names->source != nullptr) {
    pair.source_token = names->source->id;
    pair.forced_bos_id = names->target->id;
  } else if (!names->marian_target.empty()) {
    pair.source_token = tokenizer.SourceId(names->marian_target);
  }
  return pair;
}

absl::Status CheckLanguages(const ModelInfo& info,
                            const std::vector<std::string>& target_prefix_tokens,
                            absl::string_view source_language, absl::string_view target_language) {
  return ResolveNames(info, target_prefix_tokens, source_language, target_language).status();
}

std::vector<std::string> SourceLanguages(const ModelInfo& info) {
  std::vector<std::string> out;
  for (const LanguageCode& l : info.languages) out.push_back(l.code);
  if (info.languages.empty() && !info.source_language.empty()) {
    out.push_back(info.source_language);
  }
  return out;
}

std::vector<std::string> TargetLanguages(const ModelInfo& info, const Tokenizer& tokenizer) {
  return TargetLanguages(info, tokenizer.target_prefix_tokens());
}

std::vector<std::string> TargetLanguages(const ModelInfo& info,
                                         const std::vector<std::string>& target_prefix_tokens) {
  if (info.languages.empty() && !target_prefix_tokens.empty()) return target_prefix_tokens;
  std::vector<std::string> out;
  for (const LanguageCode& l : info.languages) out.push_back(l.code);
  if (info.languages.empty() && !info.target_language.empty()) {
    out.push_back(info.target_language);
  }
  return out;
}

}  // namespace glossa
