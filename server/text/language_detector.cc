#include "server/text/language_detector.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <map>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

// compact_lang_det.h uses FILE and std::vector without including their headers.
// clang-format off
#include <cstdio>
#include <vector>
#include <cld2/public/compact_lang_det.h>
#include <cld2/public/encodings.h>
// clang-format on

namespace CLD2 {
// lang_script.h, an internal header
const char* LanguageCode(Language lang);
bool IsLatnLanguage(Language lang);
}  // namespace CLD2

namespace glossa::server {
namespace {

// CLD2 keeps a few codes that ISO 639-1 has since replaced.
std::string IsoCode(const char* cld2_code) {
  const std::string code = cld2_code == nullptr ? "" : cld2_code;
  if (code == "iw") return "he";
  if (code == "jw") return "jv";
  return code;
}

std::string Cld2Code(const std::string& iso_code) {
  if (iso_code == "he") return "iw";
  if (iso_code == "jv") return "jw";
  return iso_code;
}

struct Guess {
  DetectedLanguage language;
  double score = 0.0;  // CLD2's normalized score of the language
};

// CLD2's guesses, most likely first; `hint` (ISO 639-1, or empty) is a language to expect.
std::vector<Guess> Guesses(absl::string_view text, const std::string& hint) {
  std::vector<Guess> out;
  if (text.empty() || text.size() > INT_MAX) return out;
  CLD2::CLDHints hints = {nullptr, "", CLD2::UNKNOWN_ENCODING, CLD2::UNKNOWN_LANGUAGE};
  if (!hint.empty()) hints.language_hint = CLD2::GetLanguageFromName(Cld2Code(hint).c_str());
  CLD2::Language languages[3];
  int percents[3];
  double scores[3];
  int text_bytes = 0;
  bool reliable = false;
  CLD2::ExtDetectLanguageSummary(text.data(), static_cast<int>(text.size()),
                                 /*is_plain_text=*/true, &hints,
                                 CLD2::kCLDFlagBestEffort,  // a guess for short texts too
                                 languages, percents, scores, /*resultchunkvector=*/nullptr,
                                 &text_bytes, &reliable);
  for (int i = 0; i < 3; ++i) {
    if (languages[i] == CLD2::UNKNOWN_LANGUAGE || percents[i] <= 0) continue;
    out.push_back(
        {{IsoCode(CLD2::LanguageCode(languages[i])), static_cast<double>(percents[i])}, scores[i]});
  }
  return out;
}

int Letters(absl::string_view text) {
  int n = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    // ASCII letters, and every non-ASCII character once (its lead byte).
    if ((c < 0x80 && std::isalpha(c)) || c >= 0xC0) ++n;
  }
  return n;
}

// The length in bytes of the separator at `text[i]`, or 0 for a letter: ASCII other than letters,
// the Latin-1 signs and punctuation (U+00A0..U+00BF: "¿", "¡", "«", "»") and the general
// punctuation (U+2000..U+207F: "’", "“", "—").
size_t SeparatorLength(absl::string_view text, size_t i) {
  const unsigned char c = static_cast<unsigned char>(text[i]);
  if (c < 0x80) return std::isalpha(c) ? 0 : 1;
  const unsigned char next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
  if (c == 0xC2 && next >= 0xA0 && next <= 0xBF) return 2;
  if (c == 0xE2 && (next == 0x80 || next == 0x81) && i + 2 < text.size()) return 3;
  return 0;
}

// The words of `text` in lower case, split at separators (SeparatorLength). Lower case covers
// ASCII and the Latin-1 capitals (À..Þ, U+00C0..U+00DE, two bytes C3 80..C3 9E), enough for the
// function words below ("Él", "É", "À").
std::vector<std::string> LowerWords(absl::string_view text) {
  std::vector<std::string> words(1);
  for (size_t i = 0; i < text.size(); ++i) {
    if (const size_t separator = SeparatorLength(text, i); separator > 0) {
      if (!words.back().empty()) words.emplace_back();
      i += separator - 1;
      continue;
    }
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) c = static_cast<unsigned char>(std::tolower(c));
    if (c >= 0x80 && c <= 0x9E && c != 0x97 && i > 0 &&
        static_cast<unsigned char>(text[i - 1]) == 0xC3) {
      c += 0x20;  // the second byte of a Latin-1 capital, but × (C3 97)
    }
    words.back().push_back(static_cast<char>(c));
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

// The most frequent closed-class words (articles, conjunctions, prepositions, pronouns, common
// verb forms, the numbers two and three) of the languages whose CLD2 n-gram profiles overlap most:
// the Romance languages among themselves, and their shared Latin vocabulary with English, German
// and Dutch. On a sentence CLD2's quadgrams mostly see the content words, which these languages
// share ("paz", "multiplicados", "misericordia"); the closed-class words are what tells them apart
// ("y" and "los" are Spanish, "e" and "os" Portuguese or Galician, "i" and "els" Catalan, "il" and
// "gli" Italian), as in classic stop-word language identification. Spanish also has "á", "ó", "é",
// "ú": the prepositions and conjunctions as Spanish spelling wrote them until the Academy's 1911
// rules (the Reina-Valera bible of 1909, the older editions of the classics).
struct FunctionWords {
  const char* language;
  const char* words;  // separated by spaces
};
constexpr FunctionWords kFunctionWords[] = {
    {"es",
     "y o el la lo los las un una unos unas de del al a en con por para sin sobre entre que se "
     "su sus mi mis ti mí tu te me le les nos os yo tú él ella ellos ellas usted este esta "
     "estos estas ese esa es son está están fue era ha han hay no ni pero mas más muy también "
     "como cuando donde porque pues ya á ó é ú dos tres"},
    {"pt",
     "e o a os as um uma uns umas de do da dos das ao aos à às em no na nos nas num numa com "
     "por pelo pela para sem sobre entre que se lhe me te seu sua seus suas meu minha eu tu "
     "ele ela eles elas você este esta estes estas isso isto é são está estão foi era há não "
     "nem mas mais muito também como quando onde porque já dois duas três"},
    {"gl",
     "e o a os as un unha uns unhas de do da dos das ao aos á ás en no na nos nas nun nunha "
     "con co coa por polo pola para sen sobre entre que se seu súa seus súas meu miña eu ti el "
     "ela eles elas este esta estes estas isto iso é son está están foi era hai non nin pero "
     "mais moi tamén como cando onde porque xa dous dúas tres"},
    {"ca",
     "i o el la els les un una uns unes de del dels al als a en amb per pel pels sense sobre "
     "entre que es se seu seva seus seves meu meva jo tu ell ella ells elles aquest aquesta "
     "això és són està estan va van ha han hi ho no ni però més molt també com quan on perquè "
     "ja dos dues tres"},
    {"it",
     "e o il lo la i gli le un uno una di del dello della dei degli delle a al allo alla ai "
     "agli alle da dal dalla in nel nello nella nei con per su sul sulla tra fra che si suo "
     "sua suoi sue mio mia io tu lui lei noi voi loro questo questa quello è sono sta era ha "
     "hanno non né ma più molto anche come quando dove perché già due tre"},
    {"fr",
     "et ou le la les un une des de du au aux à en dans avec par pour sans sur entre que qu "
     "qui se son sa ses mon ma mes je tu il elle nous vous ils elles ce cette ces est sont "
     "était a ont y ne pas ni mais plus très aussi comme quand où parce déjà deux trois"},
    {"ro",
     "și şi sau un o unui unei de din la în cu pe prin pentru fără despre între că care se său "
     "sa lui ei eu tu el ea noi voi ele acest această este sunt era a au nu nici dar mai "
     "foarte ca când unde deja doi două trei"},
    {"la",
     "et aut vel in ad cum sine de ex e ab a per pro sub super inter quod quia qui quae ut ne "
     "non sed enim autem est sunt erat esse eius eorum hic haec hoc ille illa illud ego tu nos "
     "vos se suus sua suum iam duo tres"},
    {"en",
     "the a an and or of to in on at by for with from without about between that which who it "
     "its he she they we you i me him them us his her their my your our this these those is "
     "are was were be been has have had not no but more very also as when where because there "
     "all up out into over after than then so if can will would do two three"},
    {"de",
     "und oder der die das den dem des ein eine einen einem einer zu in im an am auf mit von "
     "vom für ohne über zwischen dass sich sein seine ihr ihre mein meine ich du er sie es wir "
     "dieser diese dieses ist sind war hat haben nicht kein keine aber mehr sehr auch wie wenn "
     "wo weil schon zwei drei"},
    {"nl",
     "en of de het een van in op aan met voor zonder over tussen dat die zich zijn haar mijn "
     "ik jij je hij zij ze wij we dit deze is was heeft hebben niet geen maar meer heel ook "
     "als wanneer waar omdat al er twee drie"},
};

// Function word -> the languages whose list has it.
const std::map<std::string, std::vector<std::string>>& FunctionWordLanguages() {
  static const auto* const kMap = [] {
    auto* map = new std::map<std::string, std::vector<std::string>>;
    for (const FunctionWords& list : kFunctionWords) {
      for (absl::string_view word : absl::StrSplit(list.words, ' ', absl::SkipEmpty())) {
        std::vector<std::string>& languages = (*map)[std::string(word)];
        if (std::find(languages.begin(), languages.end(), list.language) == languages.end()) {
          languages.push_back(list.language);
        }
      }
    }
    return map;
  }();
  return *kMap;
}

// The function-word evidence of each language with a list: how many of the text's words (with
// repeats) are its function words, zero when none. The difference between two languages counts
// the words that tell them apart: a word both lists have adds to both.
std::map<std::string, int> FunctionWordEvidence(const std::vector<std::string>& words) {
  std::map<std::string, int> evidence;
  for (const FunctionWords& list : kFunctionWords) evidence[list.language] = 0;
  const auto& index = FunctionWordLanguages();
  for (const std::string& word : words) {
    auto it = index.find(word);
    if (it == index.end()) continue;
    for (const std::string& language : it->second) ++evidence[language];
  }
  return evidence;
}

// At most this many CLD2 passes with a language hint per text (see CldAmong).
constexpr int kMaxHintPasses = 8;

// The candidates worth a hinted CLD2 pass, at most kMaxHintPasses: first those written in the
// script CLD2 saw (Latin or not, judged by its top guess and each language's main script; a hint
// does not make CLD2 read a Latin text as Russian), and among them those with the most
// function-word evidence. A text thus costs at most kMaxHintPasses + 2 CLD2 passes (the plain
// one, the hinted ones, one in Overruling) on a server with NLLB's 200 languages too, not one
// per candidate.
std::vector<std::string> HintOrder(const std::set<std::string>& candidates,
                                   const std::map<std::string, int>& evidence,
                                   std::optional<bool> latin) {
  std::vector<std::tuple<bool, int, std::string>> ranked;  // other script, -evidence, code
  for (const std::string& candidate : candidates) {
    const CLD2::Language language = CLD2::GetLanguageFromName(Cld2Code(candidate).c_str());
    if (language == CLD2::UNKNOWN_LANGUAGE) continue;
    auto it = evidence.find(candidate);
    ranked.emplace_back(latin && CLD2::IsLatnLanguage(language) != *latin,
                        it == evidence.end() ? 0 : -it->second, candidate);
  }
  std::sort(ranked.begin(), ranked.end());
  if (ranked.size() > static_cast<size_t>(kMaxHintPasses)) ranked.resize(kMaxHintPasses);
  std::vector<std::string> out;
  for (const auto& entry : ranked) out.push_back(std::get<2>(entry));
  return out;
}

// CLD2's most likely candidate among its `guesses` (for `text`, with no hint); when none of
// them is one, the candidate CLD2 picks when told to expect it (its language hint), the most
// confident if several, the one with more function-word evidence if as confident.
std::optional<DetectedLanguage> CldAmong(absl::string_view text, const std::vector<Guess>& guesses,
                                         const std::set<std::string>& candidates,
                                         const std::map<std::string, int>& evidence) {
  for (const Guess& guess : guesses) {
    if (candidates.count(guess.language.language) > 0) return guess.language;
  }
  std::optional<bool> latin;
  if (!guesses.empty()) {
    const std::string code = Cld2Code(guesses.front().language.language);
    latin = CLD2::IsLatnLanguage(CLD2::GetLanguageFromName(code.c_str()));
  }
  auto evidence_of = [&evidence](const std::string& language) {
    auto it = evidence.find(language);
    return it == evidence.end() ? 0 : it->second;
  };
  std::optional<Guess> best;
  for (const std::string& candidate : HintOrder(candidates, evidence, latin)) {
    std::vector<Guess> hinted = Guesses(text, candidate);
    if (hinted.empty() || hinted.front().language.language != candidate) continue;
    const Guess& guess = hinted.front();
    if (!best || guess.score > best->score ||
        (guess.score == best->score &&
         evidence_of(candidate) > evidence_of(best->language.language))) {
      best = guess;
    }
  }
  if (best) return best->language;
  return std::nullopt;
}

// The candidate whose function words overrule CLD2's `pick` (its candidate, or else its own
// top guess), if any: the candidate with the most function-word evidence, when no other
// candidate has as much and `pick` is a language with a list too (a language without one has
// no evidence to compare: a Swedish text stays Swedish to CLD2). Two more words than `pick`
// overrule it; one more only when CLD2 agrees once told to expect the candidate (its language
// hint), a single word being weak evidence ("son" is Spanish for "are", "o" for "or").
std::optional<DetectedLanguage> Overruling(absl::string_view text, size_t words,
                                           const std::map<std::string, int>& evidence,
                                           const std::set<std::string>& candidates,
                                           const std::string& pick) {
  auto picked = evidence.find(pick);
  if (picked == evidence.end()) return std::nullopt;
  const std::pair<const std::string, int>* top = nullptr;
  bool tied = false;
  for (const auto& entry : evidence) {
    if (candidates.count(entry.first) == 0) continue;
    if (top == nullptr || entry.second > top->second) {
      top = &entry;
      tied = false;
    } else if (entry.second == top->second) {
      tied = true;
    }
  }
  if (top == nullptr || tied || top->first == pick) return std::nullopt;
  const int lead = top->second - picked->second;
  if (lead >= 2) {
    // Its confidence: the percent of the text's words that are its function words.
    return DetectedLanguage{top->first, 100.0 * top->second / words};
  }
  if (lead == 1) {
    std::vector<Guess> hinted = Guesses(text, top->first);
    if (!hinted.empty() && hinted.front().language.language == top->first) {
      return hinted.front().language;
    }
  }
  return std::nullopt;
}

// Whether `text` is a list of names: two words or more, each starting with a Latin capital
// (ASCII, or Latin-1's U+00C0..U+00DE but ×), none starting with a small letter, a digit word
// ("12") aside. Such a text ("Hasor, Rama, Gitthaim;") holds no word of any language, and CLD2
// calls its guess reliable all the same (Sesotho, Turkish). A word of another script is not
// judged: the text is then not a list of names.
bool NamesOnly(absl::string_view text) {
  int names = 0;
  bool word_start = true;
  for (size_t i = 0; i < text.size(); ++i) {
    if (const size_t separator = SeparatorLength(text, i); separator > 0) {
      word_start = true;
      i += separator - 1;
      continue;
    }
    if (!word_start) continue;
    word_start = false;
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const unsigned char next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (std::isdigit(c)) continue;
    const bool capital =
        std::isupper(c) || (c == 0xC3 && next >= 0x80 && next <= 0x9E && next != 0x97);
    if (!capital) return false;
    ++names;
  }
  return names >= 2;
}

absl::Status Undetected(absl::string_view why, const std::set<std::string>& candidates) {
  return absl::InvalidArgumentError(
      absl::StrCat(why, ": give source_language instead of auto (this server translates from ",
                   absl::StrJoin(candidates, ", "), ")"));
}

}  // namespace

std::vector<DetectedLanguage> DetectLanguages(absl::string_view text) {
  std::vector<DetectedLanguage> out;
  for (Guess& guess : Guesses(text, "")) out.push_back(std::move(guess.language));
  return out;
}

absl::StatusOr<DetectedLanguage> DetectAmong(absl::string_view text,
                                             const std::set<std::string>& candidates) {
  const int letters = Letters(text);
  if (letters < kMinDetectLetters) {
    return Undetected(
        absl::StrCat("the text has ", letters, " letters, too few to tell its language"),
        candidates);
  }
  const std::vector<std::string> words = LowerWords(text);
  const std::map<std::string, int> evidence = FunctionWordEvidence(words);
  const bool no_function_word = std::all_of(evidence.begin(), evidence.end(),
                                            [](const auto& entry) { return entry.second == 0; });
  if (no_function_word && NamesOnly(text)) {
    return Undetected("the text is names only (capitalized words, none a common word of a "
                      "language), which tells no language",
                      candidates);
  }
  const std::vector<Guess> guesses = Guesses(text, "");
  std::optional<DetectedLanguage> detected = CldAmong(text, guesses, candidates, evidence);
  const std::string pick = detected          ? detected->language
                           : guesses.empty() ? std::string()
                                             : guesses.front().language.language;
  if (auto overruling = Overruling(text, words.size(), evidence, candidates, pick)) {
    detected = std::move(overruling);
  }
  if (detected) return *std::move(detected);
  return Undetected("the language of the text is none the server translates from", candidates);
}

}  // namespace glossa::server
