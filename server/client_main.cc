// glossa-client: call a Glossa server from the shell.
//   glossa-client "Hola, ¿cómo estás?"            translate the arguments
//   echo "Buenos días" | glossa-client            translate stdin, a line at a time
//   glossa-client --stream "Hola"                 print pieces as they are decoded
//   glossa-client --list | --health [--service NAME]
#include <grpcpp/grpcpp.h>

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "cli/control_flags.h"
#include "util/usage.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "glossa/v1/translator.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "Server address, HOST:PORT");
ABSL_FLAG(std::string, model, "",
          "Model name (empty: the server's only model, or the one it routes the languages to)");
ABSL_FLAG(int, beam_size, 0, "Beam size (0: the server's default; 1: greedy)");
ABSL_FLAG(int, num_hypotheses, 0, "Hypotheses per text (n-best); 0: 1");
ABSL_FLAG(int, max_output_tokens, 0, "Most tokens generated per text (0: the server's limit)");
ABSL_FLAG(std::string, source_language, "",
          "Language of the texts: the model's code (spa_Latn, es_XX, es) or ISO 639-1/639-3; "
          "multilingual models need it; auto: detected per text");
ABSL_FLAG(std::string, target_language, "",
          "Language to translate into (as --source_language; Marian multi-target: >>fra<<)");
ABSL_FLAG(bool, scores, false, "Print each hypothesis' score after a tab");
ABSL_FLAG(bool, token_scores, false,
          "Print each hypothesis' per-token log-probabilities (space-separated) after a tab");
ABSL_FLAG(bool, alignment, false,
          "Print, for each output token, the index of the source token it aligns to "
          "(space-separated) after a tab");
ABSL_FLAG(bool, stream, false, "Use TranslateStream: print text pieces as they are decoded");
ABSL_FLAG(bool, list, false, "List the server's models and exit");
ABSL_FLAG(std::string, document, "",
          "Translate this file (.docx, .pptx, .xlsx, .odt, .odp, .epub, .html, .srt, .vtt, .md, "
          ".txt) with TranslateDocument, its formatting kept, and write the translation beside "
          "it, named as LibreTranslate names it (report.docx -> report.en.docx), or to --output");
ABSL_FLAG(std::string, output, "", "With --document: the file to write");
ABSL_FLAG(bool, health, false, "Check the server's health (exit 0 when SERVING) and exit");
ABSL_FLAG(std::string, service, "", "With --health: the service or model name to check");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(60), "Deadline of each call");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA certificates to trust: connect over TLS");
ABSL_FLAG(std::string, tls_cert, "", "With --tls_ca: PEM client certificate (mutual TLS)");
ABSL_FLAG(std::string, tls_key, "", "With --tls_cert: its PEM private key");
ABSL_FLAG(std::string, token, "", "Bearer token sent as 'authorization' metadata");

namespace v1 = glossa::v1;

namespace {

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoSeconds(absl::GetFlag(FLAGS_timeout)));
  if (const std::string token = absl::GetFlag(FLAGS_token); !token.empty()) {
    context.AddMetadata("authorization", "Bearer " + token);
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "glossa-client: cannot read '" << path << "'\n";
    std::exit(2);
  }
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::shared_ptr<grpc::ChannelCredentials> Credentials() {
  if (absl::GetFlag(FLAGS_tls_ca).empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ReadFile(absl::GetFlag(FLAGS_tls_ca));
  if (!absl::GetFlag(FLAGS_tls_cert).empty()) {
    options.pem_cert_chain = ReadFile(absl::GetFlag(FLAGS_tls_cert));
    options.pem_private_key = ReadFile(absl::GetFlag(FLAGS_tls_key));
  }
  return grpc::SslCredentials(options);
}

// "UNAVAILABLE": gRPC's name for a status code (its codes are absl's).
std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

int Fail(const grpc::Status& status) {
  std::cerr << "glossa-client: " << CodeName(status.error_code()) << ": " << status.error_message()
            << "\n";
  return 1;
}

int Health(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  SetDeadline(context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(absl::GetFlag(FLAGS_service));
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return Fail(status);
  std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()) << "\n";
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

int List(v1::Translator::Stub& stub) {
  grpc::ClientContext context;
  SetDeadline(context);
  v1::ListModelsResponse response;
  const grpc::Status status = stub.ListModels(&context, v1::ListModelsRequest(), &response);
  if (!status.ok()) return Fail(status);
  for (const auto& m : response.models()) {
    std::cout << m.name() << "\t" << m.source_language() << "->" << m.target_language() << "\t"
              << m.architecture() << " " << m.encoder_layers() << "+" << m.decoder_layers()
              << " layers, d_model " << m.d_model() << ", " << m.dtype() << ", vocab "
              << m.source_vocab_size() << "\t" << m.source_languages_size() << " source, "
              << m.target_languages_size() << " target languages\n";
  }
  return 0;
}

v1::TranslateRequest NewRequest() {
  v1::TranslateRequest request;
  request.set_model(absl::GetFlag(FLAGS_model));
  request.set_source_language(absl::GetFlag(FLAGS_source_language));
  request.set_target_language(absl::GetFlag(FLAGS_target_language));
  auto* o = request.mutable_options();
  o->set_beam_size(absl::GetFlag(FLAGS_beam_size));
  o->set_num_hypotheses(absl::GetFlag(FLAGS_num_hypotheses));
  o->set_max_output_tokens(absl::GetFlag(FLAGS_max_output_tokens));
  o->set_return_scores(absl::GetFlag(FLAGS_scores));
  std::string unused;  // checked in main
  const glossa::ControlFlags controls = glossa::ControlFlagsValue(&unused);
  o->set_repetition_penalty(controls.repetition_penalty);
  o->set_no_repeat_ngram_size(controls.no_repeat_ngram_size);
  o->set_min_output_tokens(controls.min_output_tokens);
  o->set_target_prefix(controls.target_prefix);
  o->set_return_token_scores(absl::GetFlag(FLAGS_token_scores));
  o->set_return_alignment(absl::GetFlag(FLAGS_alignment));
  return request;
}

void Print(const v1::Translation& t) {
  for (const auto& h : t.hypotheses()) {
    std::cout << h.text();
    if (absl::GetFlag(FLAGS_scores)) std::cout << "\t" << h.score();
    if (absl::GetFlag(FLAGS_token_scores)) {
      std::cout << "\t" << absl::StrJoin(h.token_scores(), " ");
    }
    if (absl::GetFlag(FLAGS_alignment)) std::cout << "\t" << absl::StrJoin(h.alignment(), " ");
    std::cout << "\n";
  }
}

int Translate(v1::Translator::Stub& stub, const std::string& text) {
  v1::TranslateRequest request = NewRequest();
  request.add_texts(text);
  grpc::ClientContext context;
  SetDeadline(context);
  if (!absl::GetFlag(FLAGS_stream)) {
    v1::TranslateResponse response;
    const grpc::Status status = stub.Translate(&context, request, &response);
    if (!status.ok()) return Fail(status);
    Print(response.translations(0));
    return 0;
  }
  auto reader = stub.TranslateStream(&context, request);
  // The pieces are the completion of the target prefix.
  std::cout << request.options().target_prefix();
  v1::TranslateStreamResponse message;
  while (reader->Read(&message)) {
    std::cout << message.text_piece() << std::flush;
    if (message.done()) std::cout << "\n";
  }
  const grpc::Status status = reader->Finish();
  return status.ok() ? 0 : Fail(status);
}

// Whether `name` is a file name alone: nothing that climbs out of a folder or names another.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string("/\\\0", 3)) == std::string::npos;
}

int TranslateDocument(v1::Translator::Stub& stub, const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string folder = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  v1::TranslateDocumentRequest request;
  request.set_content(ReadFile(path));
  request.set_file_name(path.substr(folder.size()));  // the server needs no local path
  request.set_model(absl::GetFlag(FLAGS_model));
  request.set_source_language(absl::GetFlag(FLAGS_source_language));
  request.set_target_language(absl::GetFlag(FLAGS_target_language));
  grpc::ClientContext context;
  SetDeadline(context);
  v1::TranslateDocumentResponse response;
  const grpc::Status status = stub.TranslateDocument(&context, request, &response);
  if (!status.ok()) return Fail(status);
  std::string output = absl::GetFlag(FLAGS_output);
  if (output.empty()) {
    // Beside the input, under the name the server chose, if it is a name and nothing more.
    if (!IsPlainFileName(response.file_name())) {
      std::cerr << "glossa-client: the server named the translation '" << response.file_name()
                << "', which is not a plain file name; nothing written (give --output)\n";
      return 2;
    }
    output = folder + response.file_name();
  }
  std::ofstream out(output, std::ios::binary);
  out << response.content();
  if (!out.flush()) {
    std::cerr << "glossa-client: cannot write '" << output << "'\n";
    return 2;
  }
  std::cout << output << "\t" << response.segments() << " segments from "
            << response.source_language() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  glossa::SetUsage(
      "Calls a Glossa server.\n  glossa-client [--server HOST:PORT] \"text to translate\" ...\n"
      "  (no text arguments: translates stdin, one line at a time)");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  std::string flag_error;
  glossa::ControlFlagsValue(&flag_error);
  if (!flag_error.empty()) {
    std::cerr << "glossa-client: " << flag_error << "\n";
    return 2;
  }
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(absl::GetFlag(FLAGS_server), Credentials(),
                                           channel_args);
  if (absl::GetFlag(FLAGS_health)) return Health(channel);
  auto stub = v1::Translator::NewStub(channel);
  if (absl::GetFlag(FLAGS_list)) return List(*stub);
  if (const std::string path = absl::GetFlag(FLAGS_document); !path.empty()) {
    return TranslateDocument(*stub, path);
  }
  int rc = 0;
  if (args.size() > 1) {
    for (size_t i = 1; i < args.size(); ++i) rc |= Translate(*stub, args[i]);
    return rc;
  }
  std::string line;
  while (std::getline(std::cin, line)) rc |= Translate(*stub, line);
  return rc;
}
