// source_language "auto": CLD2 restricted to the languages a server translates from.
#include "server/text/language_detector.h"

#include <cctype>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace glossa::server {
namespace {

using ::testing::HasSubstr;

struct Sample {
  const char* language;
  const char* text;
};

// Written for this test: everyday sentences, six per language, in seventeen languages that
// include close pairs (es/pt/gl/ca/it, da/sv, cs/pl).
const Sample kSamples[] = {
    {"es", "El tren de la mañana llegó tarde porque nevó toda la noche."},
    {"es", "¿Puedes ayudarme a llevar estas cajas al segundo piso?"},
    {"es", "Mi abuela cocina el mejor arroz con pollo del barrio."},
    {"es", "Los niños juegan en el parque mientras sus padres charlan en un banco."},
    {"es", "Necesito comprar pan, leche y huevos antes de que cierre la tienda."},
    {"es", "El año pasado viajamos por el norte de España durante dos semanas."},
    {"en", "The morning train was late because it snowed all night."},
    {"en", "Could you help me carry these boxes to the second floor?"},
    {"en", "My grandmother cooks the best chicken soup in the neighbourhood."},
    {"en", "We are going to the beach on Saturday if the weather stays warm."},
    {"en", "The library closes early on Sundays, so please return your books by noon."},
    {"en", "She has been learning to play the piano since she was seven years old."},
    {"fr", "Le train du matin est arrivé en retard parce qu'il a neigé toute la nuit."},
    {"fr", "Peux-tu m'aider à porter ces cartons au deuxième étage ?"},
    {"fr", "Ma grand-mère prépare la meilleure soupe du quartier."},
    {"fr", "Les enfants jouent dans le parc pendant que leurs parents discutent sur un banc."},
    {"fr", "Il faut que j'achète du pain, du lait et des œufs avant la fermeture du magasin."},
    {"fr", "L'année dernière, nous avons voyagé dans le nord de la France pendant deux semaines."},
    {"de", "Der Morgenzug kam zu spät, weil es die ganze Nacht geschneit hat."},
    {"de", "Kannst du mir helfen, diese Kisten in den zweiten Stock zu tragen?"},
    {"de", "Meine Großmutter kocht die beste Hühnersuppe im ganzen Viertel."},
    {"de", "Die Kinder spielen im Park, während ihre Eltern auf einer Bank plaudern."},
    {"de", "Ich muss noch Brot, Milch und Eier kaufen, bevor der Laden schließt."},
    {"de", "Letztes Jahr sind wir zwei Wochen lang durch Norddeutschland gereist."},
    {"it", "Il treno del mattino è arrivato in ritardo perché ha nevicato tutta la notte."},
    {"it", "Puoi aiutarmi a portare queste scatole al secondo piano?"},
    {"it", "Mia nonna cucina il miglior brodo di pollo del quartiere."},
    {"it", "I bambini giocano nel parco mentre i loro genitori chiacchierano su una panchina."},
    {"it", "Devo comprare pane, latte e uova prima che chiuda il negozio."},
    {"it", "L'anno scorso abbiamo viaggiato per due settimane nel nord dell'Italia."},
    {"pt", "O comboio da manhã chegou atrasado porque nevou durante toda a noite."},
    {"pt", "Podes ajudar-me a levar estas caixas para o segundo andar?"},
    {"pt", "A minha avó faz a melhor canja de galinha do bairro."},
    {"pt", "As crianças brincam no parque enquanto os pais conversam num banco."},
    {"pt", "Preciso de comprar pão, leite e ovos antes que a loja feche."},
    {"pt", "No ano passado viajámos durante duas semanas pelo norte de Portugal."},
    {"gl", "O tren da mañá chegou tarde porque nevou toda a noite."},
    {"gl", "Podes axudarme a levar estas caixas ao segundo andar?"},
    {"gl", "A miña avoa cociña o mellor caldo de galiña do barrio."},
    {"gl", "Os nenos xogan no parque mentres os seus pais conversan nun banco."},
    {"gl", "Teño que mercar pan, leite e ovos antes de que peche a tenda."},
    {"gl", "O ano pasado viaxamos dúas semanas polo norte de Galicia."},
    {"ca", "El tren del matí va arribar tard perquè va nevar tota la nit."},
    {"ca", "Em pots ajudar a portar aquestes caixes al segon pis?"},
    {"ca", "La meva àvia cuina el millor arròs amb pollastre del barri."},
    {"ca", "Els nens juguen al parc mentre els seus pares xerren en un banc."},
    {"ca", "He de comprar pa, llet i ous abans que tanqui la botiga."},
    {"ca", "L'any passat vam viatjar dues setmanes pel nord de Catalunya."},
    {"ro", "Trenul de dimineață a întârziat pentru că a nins toată noaptea."},
    {"ro", "Mă poți ajuta să duc aceste cutii la etajul doi?"},
    {"ro", "Bunica mea gătește cea mai bună supă de pui din cartier."},
    {"ro", "Copiii se joacă în parc în timp ce părinții lor stau de vorbă pe o bancă."},
    {"ro", "Trebuie să cumpăr pâine, lapte și ouă înainte să se închidă magazinul."},
    {"ro", "Anul trecut am călătorit două săptămâni prin nordul României."},
    {"nl", "De ochtendtrein was te laat omdat het de hele nacht heeft gesneeuwd."},
    {"nl", "Kun je me helpen deze dozen naar de tweede verdieping te dragen?"},
    {"nl", "Mijn oma maakt de lekkerste kippensoep van de hele buurt."},
    {"nl", "De kinderen spelen in het park terwijl hun ouders op een bankje zitten te praten."},
    {"nl", "Ik moet nog brood, melk en eieren kopen voordat de winkel dichtgaat."},
    {"nl", "Vorig jaar hebben we twee weken door het noorden van Nederland gereisd."},
    {"sv", "Morgontåget var försenat eftersom det snöade hela natten."},
    {"sv", "Kan du hjälpa mig att bära de här lådorna till andra våningen?"},
    {"sv", "Min mormor lagar den bästa kycklingsoppan i hela kvarteret."},
    {"sv", "Barnen leker i parken medan deras föräldrar pratar på en bänk."},
    {"sv", "Jag måste köpa bröd, mjölk och ägg innan affären stänger."},
    {"sv", "Förra året reste vi i två veckor genom norra Sverige."},
    {"da", "Morgentoget var forsinket, fordi det havde sneet hele natten."},
    {"da", "Kan du hjælpe mig med at bære de her kasser op på anden sal?"},
    {"da", "Min mormor laver den bedste hønsesuppe i hele kvarteret."},
    {"da", "Børnene leger i parken, mens deres forældre sidder og snakker på en bænk."},
    {"da", "Jeg skal lige købe brød, mælk og æg, før butikken lukker."},
    {"da", "Sidste år rejste vi i to uger rundt i det nordlige Jylland."},
    {"fi", "Aamujuna myöhästyi, koska koko yön satoi lunta."},
    {"fi", "Voisitko auttaa minua kantamaan nämä laatikot toiseen kerrokseen?"},
    {"fi", "Isoäitini keittää koko naapuruston parhaan kanakeiton."},
    {"fi", "Lapset leikkivät puistossa, kun heidän vanhempansa juttelevat penkillä."},
    {"fi", "Minun täytyy ostaa leipää, maitoa ja munia ennen kuin kauppa sulkeutuu."},
    {"fi", "Viime vuonna matkustimme kaksi viikkoa Pohjois-Suomessa."},
    {"pl", "Poranny pociąg się spóźnił, bo przez całą noc padał śnieg."},
    {"pl", "Czy możesz mi pomóc zanieść te pudła na drugie piętro?"},
    {"pl", "Moja babcia gotuje najlepszy rosół w całej okolicy."},
    {"pl", "Dzieci bawią się w parku, a ich rodzice rozmawiają na ławce."},
    {"pl", "Muszę jeszcze kupić chleb, mleko i jajka, zanim zamkną sklep."},
    {"pl", "W zeszłym roku przez dwa tygodnie podróżowaliśmy po północy Polski."},
    {"cs", "Ranní vlak měl zpoždění, protože celou noc sněžilo."},
    {"cs", "Můžeš mi pomoct odnést tyhle krabice do druhého patra?"},
    {"cs", "Moje babička vaří nejlepší kuřecí polévku v celé čtvrti."},
    {"cs", "Děti si hrají v parku, zatímco jejich rodiče si povídají na lavičce."},
    {"cs", "Musím ještě koupit chleba, mléko a vejce, než zavřou obchod."},
    {"cs", "Loni jsme dva týdny cestovali po severních Čechách."},
    {"ru", "Утренний поезд опоздал, потому что всю ночь шёл снег."},
    {"ru", "Ты можешь помочь мне отнести эти коробки на третий этаж?"},
    {"ru", "Моя бабушка готовит самый вкусный куриный суп в районе."},
    {"ru", "Дети играют в парке, пока их родители разговаривают на скамейке."},
    {"ru", "Мне нужно купить хлеб, молоко и яйца, пока магазин не закрылся."},
    {"ru", "В прошлом году мы две недели путешествовали по северу России."},
    {"tr", "Sabah treni geç geldi çünkü bütün gece kar yağdı."},
    {"tr", "Bu kutuları ikinci kata taşımama yardım edebilir misin?"},
    {"tr", "Büyükannem mahalledeki en güzel tavuk çorbasını yapar."},
    {"tr", "Çocuklar parkta oynarken anne babaları bir bankta sohbet ediyor."},
    {"tr", "Dükkan kapanmadan önce ekmek, süt ve yumurta almam gerekiyor."},
    {"tr", "Geçen yıl iki hafta boyunca Türkiye'nin kuzeyini gezdik."},
};

// UTF-8 characters (code points), not bytes.
int Characters(const std::string& text) {
  int n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

TEST(DetectAmongTest, TellsSeventeenLanguagesApart) {
  std::set<std::string> languages;
  for (const Sample& s : kSamples) languages.insert(s.language);
  ASSERT_EQ(languages.size(), 17u);
  int right = 0, total = 0;
  for (const Sample& s : kSamples) {
    const int length = Characters(s.text);
    EXPECT_TRUE(length >= 30 && length <= 120) << s.text;
    auto detected = DetectAmong(s.text, languages);
    ++total;
    if (detected.ok() && detected->language == s.language) {
      ++right;
    } else {
      std::printf("not %s (%s): %s\n", s.language,
                  detected.ok() ? detected->language.c_str() : "error", s.text);
    }
  }
  std::printf("multilingual sample: %d of %d right\n", right, total);
  EXPECT_GE(right * 100, total * 95);
}

TEST(DetectAmongTest, OnlyAmongTheCandidates) {
  // Catalan to CLD2; the server has no Catalan model, and Spanish is the candidate CLD2 takes.
  auto detected = DetectAmong(
      "De aquesta tierra salió Assur, y edificó á Nínive, y á Rehoboth, y á Calah,", {"es", "en"});
  ASSERT_TRUE(detected.ok()) << detected.status();
  EXPECT_EQ(detected->language, "es");
}

TEST(DetectAmongTest, FunctionWordsTellCloseLanguagesApart) {
  // CLD2 alone reads this Spanish as English ("gracia", "abundancia", "multiplicadas" look Latin
  // to it); "y", "os" and "en" are Spanish function words, none English.
  const char* text = "Gracia y paz os sean multiplicadas en abundancia.";
  ASSERT_FALSE(DetectLanguages(text).empty());
  EXPECT_EQ(DetectLanguages(text).front().language, "en");
  for (const std::set<std::string>& candidates :
       {std::set<std::string>{"es", "en"}, std::set<std::string>{"es"}}) {
    auto detected = DetectAmong(text, candidates);
    ASSERT_TRUE(detected.ok()) << detected.status();
    EXPECT_EQ(detected->language, "es");
    EXPECT_GT(detected->confidence, 0);
  }
  // "son" and "a" are Spanish function words too, but English ones outnumber them.
  auto english = DetectAmong("My son is a doctor in Boston.", {"es", "en"});
  ASSERT_TRUE(english.ok()) << english.status();
  EXPECT_EQ(english->language, "en");
}

TEST(DetectAmongTest, ALanguageNoneOfTheCandidatesIsAnError) {
  // Swedish and Danish share "i", "en", "de" with Spanish and Portuguese; no candidate is picked.
  for (const char* text : {"Barnen leker i parken medan deras föräldrar pratar på en bänk.",
                           "Jeg skal lige købe brød, mælk og æg, før butikken lukker."}) {
    auto detected = DetectAmong(text, {"es", "pt"});
    ASSERT_FALSE(detected.ok()) << text << ": " << detected->language;
    EXPECT_EQ(detected.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(detected.status().message(), HasSubstr("none the server translates from"));
  }
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

TEST(DetectAmongTest, ANamesOnlyTextIsAClearErrorNotAGuess) {
  // CLD2 calls its guesses for these reliable: Sesotho, Turkish, Kinyarwanda, Sundanese.
  for (const char* text : {"Ibhar, Elisua, Eliphelet,", "Hasor, Rama, Gitthaim;", "Buenos Aires",
                           "Barack Obama"}) {
    auto detected = DetectAmong(text, {"en", "es", "fi", "tr"});
    ASSERT_FALSE(detected.ok()) << text << ": " << detected->language;
    EXPECT_EQ(detected.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(detected.status().message(), HasSubstr("names only"));
    EXPECT_THAT(detected.status().message(), HasSubstr("en, es, fi, tr"));
  }
  // One capitalized word, a capitalized function word, a small word: the language is told.
  for (const char* text : {"Gracias", "Los Hijos De Israel", "Moisés y Aarón"}) {
    auto detected = DetectAmong(text, {"en", "es"});
    ASSERT_TRUE(detected.ok()) << text << ": " << detected.status();
    EXPECT_EQ(detected->language, "es") << text;
  }
}

TEST(DetectAmongTest, SpanishDevSetLinesOfTwentyCharactersOrMore) {
  std::ifstream in(std::string(GLOSSA_SHARED_DIR) + "/corpus/dev.es");
  if (!in) GTEST_SKIP() << "needs " << GLOSSA_SHARED_DIR << "/corpus/dev.es (../shared)";
  // The European languages of a server with some forty.
  const std::set<std::string> candidates = {"es", "en", "fr", "de", "it", "pt", "nl",
                                            "ca", "gl", "ro", "la", "sv", "da", "fi",
                                            "pl", "cs", "ru", "tr", "hu", "no"};
  int lines = 0, spanish = 0, names_only = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (Characters(line) < 20) continue;
    ++lines;
    auto detected = DetectAmong(line, candidates);
    if (detected.ok() && detected->language == "es") {
      ++spanish;
    } else if (!detected.ok() && absl::StrContains(detected.status().message(), "names only")) {
      ++names_only;
      std::printf("names only: %s\n", line.c_str());
    } else {
      ADD_FAILURE() << "not es (" << (detected.ok() ? detected->language : "error") << "): "
                    << line;
    }
  }
  std::printf("dev set: %d of %d lines of 20+ characters detected as es, %d refused as names only\n",
              spanish, lines, names_only);
  ASSERT_GT(lines, 300);
  // Every line with a word of Spanish in it is Spanish; no line is a guess in another language.
  EXPECT_EQ(spanish + names_only, lines);
  EXPECT_LE(names_only, 2);
}

}  // namespace
}  // namespace glossa::server
