// source_language "auto": CLD2 restricted to the languages a server translates from.
#include "server/text/language_detector.h"

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace glossa::server {
namespace {

using ::testing::HasSubstr;

struct Sample {
  const char* language;
  const char* text;
};

// Written for this test: everyday sentences, three per language.
const Sample kSamples[] = {
    {"es", "El tren de la mañana llegó tarde porque nevó toda la noche."},
    {"es", "¿Puedes ayudarme a llevar estas cajas al segundo piso?"},
    {"es", "Mi abuela cocina el mejor arroz con pollo del barrio."},
    {"en", "The morning train was late because it snowed all night."},
    {"en", "Could you help me carry these boxes to the second floor?"},
    {"en", "My grandmother cooks the best chicken soup in the neighbourhood."},
    {"fr", "Le train du matin est arrivé en retard parce qu'il a neigé toute la nuit."},
    {"fr", "Peux-tu m'aider à porter ces cartons au deuxième étage ?"},
    {"fr", "Ma grand-mère prépare la meilleure soupe du quartier."},
    {"de", "Der Morgenzug kam zu spät, weil es die ganze Nacht geschneit hat."},
    {"de", "Kannst du mir helfen, diese Kisten in den zweiten Stock zu tragen?"},
    {"de", "Meine Großmutter kocht die beste Hühnersuppe im ganzen Viertel."},
    {"it", "Il treno del mattino è arrivato in ritardo perché ha nevicato tutta la notte."},
    {"it", "Puoi aiutarmi a portare queste scatole al secondo piano?"},
    {"it", "Mia nonna cucina il miglior brodo di pollo del quartiere."},
    {"pt", "O comboio da manhã chegou atrasado porque nevou durante toda a noite."},
    {"pt", "Podes ajudar-me a levar estas caixas para o segundo andar?"},
    {"pt", "A minha avó faz a melhor canja de galinha do bairro."},
    {"nl", "De ochtendtrein was te laat omdat het de hele nacht heeft gesneeuwd."},
    {"nl", "Kun je me helpen deze dozen naar de tweede verdieping te dragen?"},
    {"nl", "Mijn oma maakt de lekkerste kippensoep van de hele buurt."},
    {"ru", "Утренний поезд опоздал, потому что всю ночь шёл снег."},
    {"ru", "Ты можешь помочь мне отнести эти коробки на третий этаж?"},
    {"ru", "Моя бабушка готовит самый вкусный куриный суп в районе."},
    {"pl", "Poranny pociąg się spóźnił, bo przez całą noc padał śnieg."},
    {"pl", "Czy możesz mi pomóc zanieść te pudła na drugie piętro?"},
    {"pl", "Moja babcia gotuje najlepszy rosół w całej okolicy."},
    {"tr", "Sabah treni geç geldi çünkü bütün gece kar yağdı."},
    {"tr", "Bu kutuları ikinci kata taşımama yardım edebilir misin?"},
    {"tr", "Büyükannem mahalledeki en güzel tavuk çorbasını yapar."},
    {"sv", "Morgontåget var försenat eftersom det snöade hela natten."},
    {"sv", "Kan du hjälpa mig att bära de här lådorna till andra våningen?"},
    {"sv", "Min mormor lagar den bästa kycklingsoppan i hela kvarteret."},
    {"fi", "Aamujuna myöhästyi, koska koko yön satoi lunta."},
    {"fi", "Voisitko auttaa minua kantamaan nämä laatikot toiseen kerrokseen?"},
    {"fi", "Isoäitini keittää koko naapuruston parhaan kanakeiton."},
};

TEST(DetectAmongTest, TellsTwelveLanguagesApart) {
  std::set<std::string> languages;
  for (const Sample& s : kSamples) languages.insert(s.language);
  ASSERT_EQ(languages.size(), 12u);
  int right = 0, total = 0;
  for (const Sample& s : kSamples) {
    auto detected = DetectAmong(s.text, languages);
    ++total;
    if (detected.ok() && detected->language == s.language) {
      ++right;
    } else {
      ADD_FAILURE() << s.text << ": " << (detected.ok() ? detected->language : "error")
                    << " (expected " << s.language << ")";
    }
  }
  std::printf("multilingual sample: %d of %d right\n", right, total);
  EXPECT_EQ(right, total);
}

TEST(DetectAmongTest, OnlyAmongTheCandidates) {
  // Catalan to CLD2; the server has no Catalan model, and Spanish is the candidate CLD2 takes.
  auto detected = DetectAmong(
      "De aquesta tierra salió Assur, y edificó á Nínive, y á Rehoboth, y á Calah,", {"es", "en"});
  ASSERT_TRUE(detected.ok()) << detected.status();
  EXPECT_EQ(detected->language, "es");
}

TEST(DetectAmongTest, TooShortATextIsAClearError) {
  for (const char* text : {"abc", "Sí", "12345 678", ""}) {
    auto detected = DetectAmong(text, {"en", "es"});
    ASSERT_FALSE(detected.ok()) << text;
    EXPECT_EQ(detected.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(detected.status().message(), HasSubstr("too few"));
    EXPECT_THAT(detected.status().message(), HasSubstr("en, es"));
  }
}

TEST(DetectAmongTest, SpanishDevSetLinesOfTwentyCharactersOrMore) {
  std::ifstream in(std::string(GLOSSA_SHARED_DIR) + "/corpus/dev.es");
  if (!in) GTEST_SKIP() << "needs " << GLOSSA_SHARED_DIR << "/corpus/dev.es (../shared)";
  const std::set<std::string> candidates = {"es", "en", "fr", "de", "it", "pt", "nl"};
  int lines = 0, spanish = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() < 20) continue;  // bytes: a little under 20 characters for some lines
    ++lines;
    auto detected = DetectAmong(line, candidates);
    if (detected.ok() && detected->language == "es") {
      ++spanish;
    } else {
      std::printf("not es (%s): %s\n", detected.ok() ? detected->language.c_str() : "error",
                  line.c_str());
    }
  }
  std::printf("dev set: %d of %d lines of 20+ bytes detected as es\n", spanish, lines);
  ASSERT_GT(lines, 300);
  // CLD2 takes a few lines of names or of archaic spelling for another candidate (printed above);
  // the bound keeps today's rate.
  EXPECT_GE(spanish * 100, lines * 98);
}

}  // namespace
}  // namespace glossa::server
