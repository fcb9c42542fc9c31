// glossa-batch: translate a file through Glossa servers, in order, resumably.
//   glossa-batch --server HOST:PORT --model NAME --input FILE --output FILE
//                [--concurrency N] [--resume] [--shard K/N]
//   glossa-batch --merge OUT SHARD_OUTPUT...
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "cli/control_flags.h"
#include "util/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "server/batch/batch_job.h"
#include "server/batch/client/client.h"
#include "server/batch/folders/folder_job.h"
#include "server/batch/io/log.h"
#include "server/batch/merge.h"
#include "server/glossaries/glossary_formats.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051",
          "Servers: HOST:PORT, several separated by commas (each request goes to the next one "
          "that is up; a failed request is retried on another), or one gRPC target such as "
          "dns:///glossa.ns.svc.cluster.local:50051, balanced round-robin over every address "
          "the name resolves to (a headless Kubernetes service: every pod)");
ABSL_FLAG(std::string, model, "",
          "Model name (empty: the server's only model, or the one it routes the languages to)");
ABSL_FLAG(std::string, input, "",
          "Input file: a segment per line (one of --input, --input_dir or --merge is needed)");
ABSL_FLAG(std::string, input_dir, "",
          "A folder of documents instead of --input: every .docx, .pptx, .xlsx, .odt, .odp, "
          ".epub, .html/.htm, .srt, .vtt, .md/.markdown, .txt under it (subfolders too) "
          "translated with TranslateDocument, formatting kept, into the same path under "
          "--output_dir; with --resume, the files already done are skipped");
ABSL_FLAG(std::string, output_dir, "", "With --input_dir: the folder the translations go to");
ABSL_FLAG(std::string, output, "",
          "Output file, needed with --input: a line per input line, in input order, in the "
          "input's format and line endings. Its journal is written beside it, as OUTPUT.journal");
ABSL_FLAG(std::string, format, "auto",
          "text (the whole line is the segment), tsv (the segment is in --column; other "
          "columns are kept), jsonl (the segment is the string field --field of an object per "
          "line; other fields are kept, key order too), or auto: by the input's extension "
          "(.tsv, .jsonl/.ndjson, else text). Empty lines give empty lines in every format");
ABSL_FLAG(int, column, 1, "TSV: column of the segment, counted from 1 as in cut -f");
ABSL_FLAG(int, output_column, 0,
          "TSV: column that receives the translation (0: --column, replacing the source; past "
          "the last column: the line is extended with empty columns)");
ABSL_FLAG(std::string, field, "text", "JSONL: the string field holding the segment");
ABSL_FLAG(std::string, output_field, "",
          "JSONL: the field that receives the translation (empty: --field, replacing the "
          "source)");
ABSL_FLAG(int, concurrency, 8, "Requests in flight at once");
ABSL_FLAG(int, texts_per_request, 16,
          "Segments per request (at most the server's --max_texts_per_request, 256 by default)");
ABSL_FLAG(std::string, priority, "batch",
          "Admission lane of the job's requests: batch (PRIORITY_BATCH: admitted after "
          "interactive requests, in the capacity they leave) or interactive");
ABSL_FLAG(int, beam_size, 0, "Beam size (0: the server's default; 1: greedy)");
ABSL_FLAG(std::string, source_language, "",
          "Language of the segments: the model's code (spa_Latn, es_XX, es) or ISO 639-1/639-3; "
          "multilingual models need it. Recorded in the journal");
ABSL_FLAG(std::string, target_language, "",
          "Language to translate into (as --source_language; Marian multi-target: >>fra<<). "
          "Recorded in the journal");
ABSL_FLAG(bool, split_sentences, false,
          "Translate each sentence of a segment on its own and join the translations with the "
          "segment's own spacing (TranslateRequest.split_sentences: for paragraphs and documents)");
ABSL_FLAG(std::string, glossary, "",
          "Glossary file: terms the translations must use, sent with every request "
          "(TranslateRequest.glossary; the server enforces them by beam search, so not with "
          "--beam_size 1). TSV (source TAB target a line), CSV (source,target) or JSON "
          "({\"source\": \"target\" or [\"target\", ...]}), by the extension: .tsv or .tab, "
          ".csv, .json; in TSV and CSV a source term may repeat to add alternatives. Its "
          "entries' digest is recorded in the journal");
ABSL_FLAG(int, max_output_tokens, 0, "Most tokens generated per segment (0: the server's limit)");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(300), "Deadline of each request");
ABSL_FLAG(int, max_attempts, 10,
          "Tries per request on UNAVAILABLE, RESOURCE_EXHAUSTED or DEADLINE_EXCEEDED before the "
          "job stops (exit code 3; --resume continues it)");
ABSL_FLAG(absl::Duration, retry_backoff, absl::Milliseconds(250),
          "Wait before the first retry; it doubles with each retry (with +-20% jitter)");
ABSL_FLAG(absl::Duration, max_backoff, absl::Seconds(10), "Longest wait between retries");
ABSL_FLAG(bool, resume, false,
          "Continue from OUTPUT.journal: the output is cut back to the last checkpoint and the "
          "job goes on from the next line; no line is translated twice. Without a journal, start "
          "from the beginning (so it is safe to always pass --resume, e.g. in a Kubernetes Job). "
          "Refused when the journal belongs to another job (input, format, shard, model, "
          "glossary or decoding options differ)");
ABSL_FLAG(std::string, shard, "",
          "K/N: translate only shard K (0 <= K < N) of the input: the K-th of N contiguous, "
          "equal (to a line) ranges of lines. Join the shard outputs with --merge (or, once all "
          "are complete, cat them in shard order)");
ABSL_FLAG(absl::Duration, checkpoint_interval, absl::Seconds(1),
          "How often the output is fsync'd and its length journaled (what --resume keeps)");
ABSL_FLAG(absl::Duration, progress_interval, absl::Seconds(5),
          "How often a progress line is printed on stderr");
ABSL_FLAG(std::string, merge, "",
          "glossa-batch --merge OUT SHARD_OUTPUT...: join the outputs of all shards of one job "
          "into OUT, after checking with their journals that each is complete and that together "
          "they are the shards 0..N-1 of the same job. Exit 0: merged; 1: merged, but some "
          "segments had failed; 2: nothing written");

namespace {

using glossa::batch::kExitUsage;
using glossa::batch::Log;

constexpr char kUsage[] =
    "Translates a file through Glossa servers, keeping its order and format.\n"
    "  glossa-batch --server HOST:PORT[,HOST:PORT...] --model NAME --input FILE --output FILE\n"
    "               [--concurrency N] [--resume] [--shard K/N] [--format text|tsv|jsonl]\n"
    "  glossa-batch --merge OUT SHARD_OUTPUT...\n"
    "  glossa-batch --server HOST:PORT --input_dir DIR --output_dir OUT --target_language en\n"
    "               [--source_language es|auto] [--concurrency N] [--resume]\n"
    "\n"
    "Progress (segments done/total, segments/s, tokens/s, ETA) and a summary go to stderr.\n"
    "Failures never leave a gap: every input line gives exactly one output line.\n"
    "  - A line that cannot be parsed (TSV without the column, invalid JSON, not UTF-8) is\n"
    "    copied unchanged; a segment the server refuses for good (INVALID_ARGUMENT: e.g. too\n"
    "    long) gets an empty translation. Both are reported on stderr as 'line N: CODE: why'\n"
    "    and in the journal, the job goes on, and the exit code is 1.\n"
    "  - UNAVAILABLE, RESOURCE_EXHAUSTED and DEADLINE_EXCEEDED are retried (--max_attempts,\n"
    "    on another server when there are several). When the retries run out the job stops,\n"
    "    the output holds every line before the failed request, and the exit code is 3:\n"
    "    rerun with --resume to continue. SIGINT and SIGTERM stop the job the same way.\n"
    "Exit codes: 0 every segment translated (and --help); 1 the output is complete but some\n"
    "segments failed (see stderr or the journal); 2 usage or input error (an unknown flag, a\n"
    "flag value that does not parse, unreadable input, unknown model, options the server\n"
    "refuses, a journal of another job); 3 stopped before the end (servers unreachable,\n"
    "SIGINT/SIGTERM, disk error): rerun with --resume.";

std::string Validate(const glossa::batch::JobOptions& o) {
  if (o.input.empty() || o.output.empty()) return "--input and --output are required";
  if (o.input == o.output) return "--output must differ from --input";
  if (o.concurrency < 1 || o.concurrency > 1024) return "--concurrency must be 1..1024";
  if (o.texts_per_request < 1) return "--texts_per_request must be 1 or more";
  if (absl::GetFlag(FLAGS_beam_size) < 0 || absl::GetFlag(FLAGS_max_output_tokens) < 0) {
    return "--beam_size and --max_output_tokens must be 0 or more";
  }
  if (absl::GetFlag(FLAGS_max_attempts) < 1) return "--max_attempts must be 1 or more";
  if (absl::GetFlag(FLAGS_priority) != "batch" && absl::GetFlag(FLAGS_priority) != "interactive") {
    return "--priority must be batch or interactive";
  }
  std::string control_error;
  glossa::ControlFlagsValue(&control_error);
  if (!control_error.empty()) return control_error;
  if (absl::Status s = glossa::batch::ValidateFormatOptions(o.format); !s.ok()) {
    return std::string(s.message());
  }
  return "";
}

// The job's options from the flags; an error message in `error`.
glossa::batch::JobOptions JobFromFlags(std::string* error) {
  glossa::batch::JobOptions o;
  o.input = absl::GetFlag(FLAGS_input);
  o.output = absl::GetFlag(FLAGS_output);
  absl::StatusOr<glossa::batch::Format> format =
      glossa::batch::ParseFormat(absl::GetFlag(FLAGS_format), o.input);
  absl::StatusOr<glossa::batch::Shard> shard =
      glossa::batch::ParseShard(absl::GetFlag(FLAGS_shard));
  if (!format.ok() || !shard.ok()) {
    *error = std::string((format.ok() ? shard.status() : format.status()).message());
    return o;
  }
  o.format.format = *format;
  o.format.column = absl::GetFlag(FLAGS_column);
  o.format.output_column = absl::GetFlag(FLAGS_output_column);
  o.format.field = absl::GetFlag(FLAGS_field);
  o.format.output_field = absl::GetFlag(FLAGS_output_field);
  o.shard = *shard;
  o.concurrency = absl::GetFlag(FLAGS_concurrency);
  o.texts_per_request = absl::GetFlag(FLAGS_texts_per_request);
  o.resume = absl::GetFlag(FLAGS_resume);
  o.checkpoint_interval = absl::GetFlag(FLAGS_checkpoint_interval);
  o.progress_interval = absl::GetFlag(FLAGS_progress_interval);
  std::string unused;  // checked in Validate
  const glossa::ControlFlags controls = glossa::ControlFlagsValue(&unused);
  o.settings = {{"model", absl::GetFlag(FLAGS_model)},
                {"beam_size", absl::GetFlag(FLAGS_beam_size)},
                {"max_output_tokens", absl::GetFlag(FLAGS_max_output_tokens)}};
  // Recorded only when set, so that journals of jobs without controls stay as they were.
  if (controls.repetition_penalty != 0) {
    o.settings["repetition_penalty"] = controls.repetition_penalty;
  }
  if (controls.no_repeat_ngram_size != 0) {
    o.settings["no_repeat_ngram_size"] = controls.no_repeat_ngram_size;
  }
  if (controls.min_output_tokens != 0) o.settings["min_output_tokens"] = controls.min_output_tokens;
  if (!controls.target_prefix.empty()) o.settings["target_prefix"] = controls.target_prefix;
  // Only when given, so that the journals of jobs without languages stay as they were.
  for (const auto& [key, value] : {std::pair{"source_language", absl::GetFlag(FLAGS_source_language)},
                                   {"target_language", absl::GetFlag(FLAGS_target_language)}}) {
    if (!value.empty()) o.settings[key] = value;
  }
  // Only when set: journals written before the flag existed still resume.
  if (absl::GetFlag(FLAGS_split_sentences)) o.settings["split_sentences"] = true;
  *error = Validate(o);
  return o;
}

// Abseil's parser ends the process with exit code 1 on a bad command line (an unknown flag, a
// value that does not parse), and after --help: 1 is the code of a job complete with failed
// segments, which a Kubernetes Job counts as done. While it parses, an exit is made a usage
// error's (2), or 0 when the command line asks for help or the version.
int g_parse_exit_code = -1;  // >= 0 while the command line is parsed

void ExitCodeOfParse() {
  if (g_parse_exit_code < 0) return;
  std::fflush(nullptr);
  std::_Exit(g_parse_exit_code);
}

bool AsksForHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (!absl::ConsumePrefix(&arg, "-")) continue;
    absl::ConsumePrefix(&arg, "-");
    arg = arg.substr(0, arg.find('='));
    if (absl::StartsWith(arg, "help") || arg == "version" || arg == "only_check_args") {
      return true;
    }
  }
  return false;
}

std::vector<char*> ParseFlags(int argc, char** argv) {
  g_parse_exit_code = AsksForHelp(argc, argv) ? glossa::batch::kExitOk : kExitUsage;
  std::atexit(ExitCodeOfParse);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  g_parse_exit_code = -1;
  return args;
}

// FNV-1a, 64 bits: a digest of the glossary for the journal (not a secret: only a change has to
// show).
std::string Fnv1a64(absl::string_view data) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : data) hash = (hash ^ c) * 0x100000001b3ull;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

// --glossary: the file's entries into `entries`, and into `settings` (the job's identity in its
// journal) their count and digest. Returns an error message, or "" (also without the flag).
std::string GlossaryFromFlags(
    nlohmann::json* settings,
    google::protobuf::RepeatedPtrField<glossa::v1::GlossaryEntry>* entries) {
  const std::string path = absl::GetFlag(FLAGS_glossary);
  if (path.empty()) return "";
  absl::StatusOr<glossa::server::GlossaryFormat> format =
      glossa::server::GlossaryFormatOfPath(path);
  if (!format.ok()) return absl::StrCat("--glossary ", format.status().message());
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return absl::StrCat("--glossary: cannot read '", path, "'");
  auto parsed = glossa::server::ParseGlossaryEntries(text, *format);
  if (!parsed.ok()) return absl::StrCat("--glossary ", path, ": ", parsed.status().message());
  (*settings)["glossary"] = {{"entries", parsed->size()},
                             {"fnv1a64", Fnv1a64(glossa::server::ToTsv(*parsed))}};
  entries->Assign(parsed->begin(), parsed->end());
  return "";
}

glossa::batch::ClientOptions ClientFromFlags() {
  glossa::batch::ClientOptions c;
  c.model = absl::GetFlag(FLAGS_model);
  c.source_language = absl::GetFlag(FLAGS_source_language);
  c.target_language = absl::GetFlag(FLAGS_target_language);
  c.split_sentences = absl::GetFlag(FLAGS_split_sentences);
  c.decoding.set_beam_size(absl::GetFlag(FLAGS_beam_size));
  c.decoding.set_max_output_tokens(absl::GetFlag(FLAGS_max_output_tokens));
  c.priority = absl::GetFlag(FLAGS_priority) == "batch" ? glossa::v1::PRIORITY_BATCH
                                                        : glossa::v1::PRIORITY_INTERACTIVE;
  std::string unused;  // checked in Validate
  const glossa::ControlFlags controls = glossa::ControlFlagsValue(&unused);
  c.decoding.set_repetition_penalty(controls.repetition_penalty);
  c.decoding.set_no_repeat_ngram_size(controls.no_repeat_ngram_size);
  c.decoding.set_min_output_tokens(controls.min_output_tokens);
  c.decoding.set_target_prefix(controls.target_prefix);
  c.timeout = absl::GetFlag(FLAGS_timeout);
  c.retry.max_attempts = absl::GetFlag(FLAGS_max_attempts);
  c.retry.initial_backoff = absl::GetFlag(FLAGS_retry_backoff);
  c.retry.max_backoff = absl::GetFlag(FLAGS_max_backoff);
  return c;
}

}  // namespace

// --input_dir: a folder of documents (folders/folder_job.h), with the line job's exit codes.
int RunFolder(glossa::batch::TranslatorClient& client) {
  glossa::batch::FolderJobOptions o;
  o.input_dir = absl::GetFlag(FLAGS_input_dir);
  o.output_dir = absl::GetFlag(FLAGS_output_dir);
  o.concurrency = absl::GetFlag(FLAGS_concurrency);
  o.resume = absl::GetFlag(FLAGS_resume);
  o.progress_interval = absl::GetFlag(FLAGS_progress_interval);
  o.settings = absl::StrCat("model=", absl::GetFlag(FLAGS_model),
                            " source=", absl::GetFlag(FLAGS_source_language),
                            " target=", absl::GetFlag(FLAGS_target_language));
  using Result = glossa::batch::FolderJobResult;
  switch (glossa::batch::RunFolderJob(o, client).outcome) {
    case Result::kDone:
      return glossa::batch::kExitOk;
    case Result::kSomeFailed:
      return glossa::batch::kExitFailed;
    case Result::kUsage:
      return kExitUsage;
    case Result::kStopped:
      break;
  }
  return glossa::batch::kExitStopped;
}

int main(int argc, char** argv) {
  glossa::SetUsage(kUsage);
  std::vector<char*> args = ParseFlags(argc, argv);
  if (const std::string out = absl::GetFlag(FLAGS_merge); !out.empty()) {
    return glossa::batch::MergeShards(out, std::vector<std::string>(args.begin() + 1, args.end()));
  }
  if (args.size() > 1) {
    Log(absl::StrCat("unexpected argument '", args[1], "' (see --help)"));
    return kExitUsage;
  }
  std::string error;
  const bool folder = !absl::GetFlag(FLAGS_input_dir).empty();
  if (folder && (absl::GetFlag(FLAGS_output_dir).empty() || !absl::GetFlag(FLAGS_input).empty() ||
                 !absl::GetFlag(FLAGS_output).empty() || !absl::GetFlag(FLAGS_shard).empty())) {
    Log("--input_dir needs --output_dir, and takes neither --input, --output nor --shard "
        "(see --help)");
    return kExitUsage;
  }
  glossa::batch::JobOptions job = JobFromFlags(&error);
  if (folder) error.clear();  // the line job's flags do not apply
  glossa::batch::ClientOptions client_options = ClientFromFlags();
  if (error.empty()) error = GlossaryFromFlags(&job.settings, &client_options.glossary);
  const std::vector<std::string> targets = glossa::batch::SplitTargets(absl::GetFlag(FLAGS_server));
  if (error.empty() && targets.empty()) error = "--server names no server";
  if (!error.empty()) {
    Log(absl::StrCat(error, " (see --help)"));
    return kExitUsage;
  }
  glossa::batch::TranslatorClient client(targets, std::move(client_options));
  if (!absl::GetFlag(FLAGS_input_dir).empty()) return RunFolder(client);
  return glossa::batch::RunJob(job, client);
}
