// glossa-translate: offline translation of lines with the in-process engine.
//   glossa-translate --model FILE [--beam_size N] [--glossary FILE.tsv] < in.txt > out.txt
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "util/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "cli/control_flags.h"
#include "engine/translator.h"
#include "model/model_file.h"
#include "text/languages.h"
#include "text/tokenizer.h"
#include "util/threads.h"

ABSL_FLAG(std::vector<std::string>, model, {},
          "Glossa model file (made by model_tools/glossa-convert); several, comma-separated: the "
          "one that covers --source_language -> --target_language translates (a bilingual model "
          "before a multilingual one, then the smaller file, then the order given). Default: the "
          "bundled demo model.");
ABSL_FLAG(std::string, input, "", "Input file, one sentence per line (default: stdin)");
ABSL_FLAG(std::string, output, "", "Output file (default: stdout)");
ABSL_FLAG(int, beam_size, 0, "Beam size; 1 = greedy; 0 = the default (4)");
ABSL_FLAG(std::string, source_language, "",
          "Language of the input: the model's code (spa_Latn, es_XX, es) or an ISO 639-1/639-3 "
          "code naming one of its languages; multilingual models need it");
ABSL_FLAG(std::string, target_language, "",
          "Language to translate into (as --source_language; Marian multi-target models: its "
          ">>fra<< token); multilingual models need it");
ABSL_FLAG(int, max_output_tokens, 0, "Most tokens generated per sentence, end-of-sentence "
          "included; 0 = the model's limit");
ABSL_FLAG(int, num_hypotheses, 1, "Hypotheses per sentence (n-best, <= beam_size); with more "
          "than one, lines read 'INDEX ||| TEXT ||| SCORE'");
ABSL_FLAG(double, length_penalty, -1000, "Length penalty (score / length^penalty); -1000 (the "
          "default) or less: the model's generation config");
ABSL_FLAG(bool, scores, false, "Append '\\tSCORE' to each output line");
ABSL_FLAG(bool, token_scores, false,
          "Append a tab and each token's log-probability (space-separated; with n-best: ' ||| ' "
          "and the same); a target prefix's tokens included");
ABSL_FLAG(bool, alignment, false,
          "Append a tab and, for each output token, the index of the source token it aligns to "
          "(space-separated; with n-best: ' ||| ' and the same); not with --split_sentences");
ABSL_FLAG(bool, inline_tags, false,
          "Lines carry inline tags (<b>, <i>, <a href=...>, <br/>...): each line is translated "
          "without them and they are put on the words that translate the words they marked "
          "(the model's cross-attention); text between tags is XML-escaped (&amp; &lt; &gt;), "
          "in the input and in the output");
ABSL_FLAG(bool, token_ids, false, "Print generated token ids instead of text (space-separated)");
ABSL_FLAG(int, threads, 1, "Compute threads (OpenMP team used by oneDNN)");
ABSL_FLAG(int, batch_size, 32, "Sentences encoded and decoded together");
ABSL_FLAG(std::string, compute_type, "", glossa::kComputeTypeFlagHelp);
ABSL_FLAG(bool, float32_output_layer, false, glossa::kFloat32OutputLayerFlagHelp);
ABSL_FLAG(bool, argmax_screen, true, glossa::kArgmaxScreenFlagHelp);
ABSL_FLAG(bool, split_sentences, false, "Translate each sentence of a line on its own (ICU's "
          "sentence breaks for the model's source language; over-long sentences cut further) and "
          "join the translations with the line's own spacing");
ABSL_FLAG(int, chunk_lines, 1024, "Lines read, sorted by length and translated at a time");
ABSL_FLAG(std::string, glossary, "",
          "Glossary file: one 'SOURCE<TAB>TARGET' per line (a repeated source adds another "
          "target, any one of which will do; blank lines and lines starting with # skipped). "
          "Where a source term occurs in a line (as whole words, case and Unicode compatibility "
          "forms folded), its translation contains the target; beam search only, at most 16 "
          "terms per line (per sentence with --split_sentences)");

namespace {

std::string DefaultModelPath(const char* argv0) {
  const std::string exe = std::string(argv0);
  const std::string dir = exe.find('/') == std::string::npos ? "." : exe.substr(0, exe.rfind('/'));
  for (const std::string& candidate :
       {dir + "/../models/opus-mt-es-en-bible.glossa", dir + "/../../models/opus-mt-es-en-bible.glossa",
        std::string("/usr/share/glossa/models/opus-mt-es-en-bible.glossa")}) {
    if (std::ifstream(candidate).good()) return candidate;
  }
  return "models/opus-mt-es-en-bible.glossa";
}

void WriteChunk(const std::vector<glossa::Translation>& results, size_t first_index,
                int num_hypotheses, std::ostream& out) {
  for (size_t i = 0; i < results.size(); ++i) {
    for (const auto& h : results[i].hypotheses) {
      std::string text = absl::GetFlag(FLAGS_token_ids) ? absl::StrJoin(h.token_ids, " ") : h.text;
      const bool token_scores = absl::GetFlag(FLAGS_token_scores);
      const bool alignment = absl::GetFlag(FLAGS_alignment);
      if (num_hypotheses > 1) {
        out << (first_index + i) << " ||| " << text << " ||| " << h.score;
        if (token_scores) out << " ||| " << absl::StrJoin(h.token_scores, " ");
        if (alignment) out << " ||| " << absl::StrJoin(h.alignment, " ");
        out << "\n";
      } else {
        out << text;
        if (absl::GetFlag(FLAGS_scores)) out << "\t" << h.score;
        if (token_scores) out << "\t" << absl::StrJoin(h.token_scores, " ");
        if (alignment) out << "\t" << absl::StrJoin(h.alignment, " ");
        out << "\n";
      }
    }
  }
  out.flush();
}

struct Glossary {
  std::vector<glossa::GlossaryTerm> terms;
  std::vector<int> line_of_term;  // the file line (from 1) of each term's first target
};

// Reads a glossary TSV file; the error names the file and the line.
absl::StatusOr<Glossary> ReadGlossary(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read --glossary '", path, "'"));
  Glossary glossary;
  std::map<std::string, size_t> index;  // source -> its term
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (absl::StripAsciiWhitespace(line).empty() || line[0] == '#') continue;
    const std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
    const auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("--glossary '", path, "' line ", number, ": ", why));
    };
    if (fields.size() != 2) {
      return bad(absl::StrCat("expected SOURCE<TAB>TARGET, found ", fields.size(),
                              fields.size() == 1 ? " field" : " fields"));
    }
    const std::string source(absl::StripAsciiWhitespace(fields[0]));
    const std::string target(absl::StripAsciiWhitespace(fields[1]));
    if (source.empty()) return bad("the source term is empty");
    if (target.empty()) return bad("the target term is empty");
    auto [it, added] = index.emplace(source, glossary.terms.size());
    if (added) {
      glossary.terms.push_back({source, {}});
      glossary.line_of_term.push_back(number);
    }
    std::vector<std::string>& targets = glossary.terms[it->second].targets;
    if (std::find(targets.begin(), targets.end(), target) == targets.end()) {
      targets.push_back(target);
    }
  }
  return glossary;
}

// Checks every term as GlossaryConstraints will (source and targets valid UTF-8 and not empty
// once normalised or encoded, no target a token prefix of another) by matching each term's
// source against itself; the error names the term's file line.
absl::Status CheckGlossary(const glossa::Model& model, const Glossary& glossary,
                           const std::string& path) {
  for (size_t k = 0; k < glossary.terms.size(); ++k) {
    const std::vector<std::string> texts = {glossary.terms[k].source};
    absl::Status status = [&]() -> absl::Status {
      auto sources = glossa::TokenizeTexts(model, texts);
      if (!sources.ok()) return sources.status();
      return glossa::GlossaryConstraints(model, texts, *sources, {glossary.terms[k]}, 1).status();
    }();
    if (!status.ok()) {
      // "glossary entry 0, target 1: ..." or "glossary entry 0: ..." (a message about the term).
      absl::string_view message = status.message();
      if (!absl::ConsumePrefix(&message, "glossary entry 0")) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--glossary '", path, "' line ", glossary.line_of_term[k], ": ", message));
      }
      return absl::InvalidArgumentError(absl::StrCat("--glossary '", path, "' line ",
                                                     glossary.line_of_term[k], " (source '",
                                                     glossary.terms[k].source, "')", message));
    }
  }
  return absl::OkStatus();
}

// Of several model files, the one that covers source -> target: bilingual before multilingual,
// then the smaller file, then the order given. Reads each file's header and vocabulary only.
absl::StatusOr<std::string> ChooseModel(const std::vector<std::string>& paths,
                                        const std::string& source, const std::string& target) {
  if (paths.size() == 1) return paths.front();
  if (source.empty() || target.empty()) {
    return absl::InvalidArgumentError(
        "with several --model files, give --source_language and --target_language: they choose "
        "the model");
  }
  std::tuple<bool, uint64_t, size_t> best_key;
  std::string best;
  for (size_t i = 0; i < paths.size(); ++i) {
    auto file = glossa::ModelFile::Open(paths[i], /*verify_checksums=*/false);
    if (!file.ok()) return file.status();
    auto info = glossa::ParseModelInfo((*file)->header());
    if (!info.ok()) return info.status();
    auto tokenizer = glossa::Tokenizer::Load(**file, info->config);
    if (!tokenizer.ok()) return tokenizer.status();
    if (!glossa::CheckLanguages(*info, (*tokenizer)->target_prefix_tokens(), source, target).ok()) {
      continue;
    }
    const auto key = std::make_tuple(!info->languages.empty(), (*file)->size_bytes(), i);
    if (best.empty() || key < best_key) {
      best_key = key;
      best = paths[i];
    }
  }
  if (best.empty()) {
    return absl::NotFoundError(absl::StrCat("none of the --model files translates '", source,
                                            "' into '", target, "'"));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  // OpenMP's default waits (spin a while, then sleep): one team and nothing else computing here.
  // Sleeping at once (OMP_WAIT_POLICY=passive, as glossa-server does for its many workers) made
  // --threads 2 no faster than 1 (glossa-bench: greedy batch 32, 4,160 against 8,429 tokens/s).
  glossa::SetUsage(
      "Translates sentences, one per line, with a Glossa model.\n"
      "  glossa-translate --model MODEL.glossa [--beam_size N] < in.txt > out.txt");
  absl::ParseCommandLine(argc, argv);
  glossa::SetComputeThreads(absl::GetFlag(FLAGS_threads));
  std::vector<std::string> model_paths = absl::GetFlag(FLAGS_model);
  if (model_paths.empty()) model_paths.push_back(DefaultModelPath(argv[0]));
  auto chosen = ChooseModel(model_paths, absl::GetFlag(FLAGS_source_language),
                            absl::GetFlag(FLAGS_target_language));
  if (!chosen.ok()) {
    std::cerr << "glossa-translate: " << chosen.status().message() << "\n";
    return 2;
  }
  const std::string model_path = *chosen;
  if (model_paths.size() > 1) std::cerr << "glossa-translate: model " << model_path << "\n";
  glossa::ModelOptions model_options;
  model_options.compute_type = absl::GetFlag(FLAGS_compute_type);
  model_options.float32_output_layer = absl::GetFlag(FLAGS_float32_output_layer);
  model_options.argmax_screen = absl::GetFlag(FLAGS_argmax_screen);
  auto model = glossa::Model::Load(model_path, model_options);
  if (!model.ok()) {
    std::cerr << "glossa-translate: " << model.status().message() << "\n";
    return 2;
  }
  glossa::TranslatorOptions topts;
  topts.max_batch_size = std::max(1, absl::GetFlag(FLAGS_batch_size));
  topts.threads = absl::GetFlag(FLAGS_threads);
  glossa::Translator translator(*model, topts);
  glossa::TranslateOptions opts;
  opts.beam_size = absl::GetFlag(FLAGS_beam_size);
  opts.max_output_tokens = absl::GetFlag(FLAGS_max_output_tokens);
  opts.num_hypotheses = absl::GetFlag(FLAGS_num_hypotheses);
  opts.source_language = absl::GetFlag(FLAGS_source_language);
  opts.target_language = absl::GetFlag(FLAGS_target_language);
  if (absl::GetFlag(FLAGS_length_penalty) > -1000) {
    opts.length_penalty = static_cast<float>(absl::GetFlag(FLAGS_length_penalty));
  }
  std::string flag_error;
  const glossa::ControlFlags controls = glossa::ControlFlagsValue(&flag_error);
  if (!flag_error.empty()) {
    std::cerr << "glossa-translate: " << flag_error << "\n";
    return 2;
  }
  opts.repetition_penalty = controls.repetition_penalty;
  opts.no_repeat_ngram_size = controls.no_repeat_ngram_size;
  opts.min_output_tokens = controls.min_output_tokens;
  opts.target_prefix = controls.target_prefix;
  opts.token_scores = absl::GetFlag(FLAGS_token_scores);
  opts.alignment = absl::GetFlag(FLAGS_alignment);
  // The n-best format always prints scores.
  opts.scores = absl::GetFlag(FLAGS_scores) || opts.num_hypotheses > 1;
  if (const std::string path = absl::GetFlag(FLAGS_glossary); !path.empty()) {
    auto glossary = ReadGlossary(path);
    absl::Status checked =
        glossary.ok() ? CheckGlossary(**model, *glossary, path) : glossary.status();
    if (!checked.ok()) {
      std::cerr << "glossa-translate: " << checked.message() << "\n";
      return 2;
    }
    opts.glossary = std::move(glossary->terms);
  }
  if (auto resolved = translator.Resolve(opts); !resolved.ok()) {
    std::cerr << "glossa-translate: " << resolved.status().message() << "\n";
    return 2;
  }

  std::ifstream in_file;
  std::ofstream out_file;
  const std::string input = absl::GetFlag(FLAGS_input), output = absl::GetFlag(FLAGS_output);
  if (!input.empty()) {
    in_file.open(input);
    if (!in_file) {
      std::cerr << "glossa-translate: cannot read --input '" << input << "'\n";
      return 2;
    }
  }
  if (!output.empty()) {
    out_file.open(output);
    if (!out_file) {
      std::cerr << "glossa-translate: cannot write --output '" << output << "'\n";
      return 2;
    }
  }
  std::istream& in = input.empty() ? std::cin : in_file;
  std::ostream& out = output.empty() ? std::cout : out_file;
  const bool progress = !input.empty();
  const size_t chunk = static_cast<size_t>(std::max(1, absl::GetFlag(FLAGS_chunk_lines)));
  const absl::Time start = absl::Now();
  size_t done = 0;
  std::vector<std::string> lines;
  std::string line;
  bool more = true;
  while (more) {
    lines.clear();
    while (lines.size() < chunk && (more = static_cast<bool>(std::getline(in, line)))) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(line);
    }
    if (lines.empty()) break;
    const bool split = absl::GetFlag(FLAGS_split_sentences);
    auto results = absl::GetFlag(FLAGS_inline_tags) ? translator.TranslateTagged(lines, opts, split)
                   : split                          ? translator.TranslateDocuments(lines, opts)
                                                    : translator.Translate(lines, opts);
    if (!results.ok()) {
      std::cerr << "glossa-translate: lines " << done + 1 << "-" << done + lines.size() << ": "
                << results.status().message() << "\n";
      return 1;
    }
    WriteChunk(*results, done, opts.num_hypotheses, out);
    done += lines.size();
    if (progress) {
      const double secs = absl::ToDoubleSeconds(absl::Now() - start);
      std::cerr << "glossa-translate: " << done << " lines, " << secs << " s, "
                << (secs > 0 ? done / secs : 0) << " lines/s\n";
    }
  }
  if (!out) {
    std::cerr << "glossa-translate: write error\n";
    return 1;
  }
  return 0;
}
