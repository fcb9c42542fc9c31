// The bundled demo model (models/opus-mt-es-en-bible.glossa), served when no model is named:
// what it is, and sentences it translates well, for the start-up lines and the page at /.
#ifndef GLOSSA_SERVER_DEMO_MODEL_H_
#define GLOSSA_SERVER_DEMO_MODEL_H_

#include <string>
#include <vector>

namespace glossa::server {

inline constexpr char kDemoAbout[] =
    "The bundled demo model is small and trained only on Bible verses: it translates "
    "verse-like Spanish well and everyday Spanish poorly. To serve a real model, see "
    "docs/quickstart.md.";

// From the held-out dev set's verses and their like; each translation checked by
// tests/python/test_server.py.
inline const std::vector<std::string>& DemoExamples() {
  static const std::vector<std::string> examples = {
      "¡Cuán grandes son tus obras, oh Jehová!",
      "La gracia de nuestro Señor Jesucristo sea con vuestro espíritu. Amén.",
      "Y los hijos de Israel partieron de Egipto.",
      "Y Moisés edificó un altar.",
  };
  return examples;
}

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_DEMO_MODEL_H_
