#include "server/batch/folders/folder_job.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "server/batch/io/log.h"
#include "server/files/read_document.h"

namespace glossa::batch {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr char kJournal[] = ".glossa-batch-folder.journal";

std::atomic<bool> g_interrupted{false};

void OnSignal(int signal) {
  g_interrupted = true;
  std::signal(signal, SIG_DFL);  // a second Ctrl-C kills at once
}

bool IsDocument(const fs::path& path) {
  const std::string extension = absl::AsciiStrToLower(path.extension().string());
  for (absl::string_view known : server::kDocumentExtensions) {
    if (extension == known) return true;
  }
  return false;
}

// The path with every symbolic link on it resolved, without a trailing separator; empty when it
// cannot be resolved.
fs::path Resolved(const fs::path& path) {
  std::error_code error;
  fs::path resolved = fs::weakly_canonical(path, error);
  if (error) return {};
  if (resolved.has_relative_path() && resolved.filename().empty()) {
    resolved = resolved.parent_path();
  }
  return resolved;
}

// Whether `inner` is `outer` or inside it, once symbolic links are resolved (false when either
// cannot be resolved).
bool Within(const fs::path& inner, const fs::path& outer) {
  const fs::path a = Resolved(inner), b = Resolved(outer);
  if (a.empty() || b.empty()) return false;
  auto mismatch = std::mismatch(b.begin(), b.end(), a.begin(), a.end());
  return mismatch.first == b.end();
}

bool ReadFile(const fs::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

// Where the translation of `file` (a path relative to --input_dir) goes: the same path under
// `output_dir`. Empty when it would not be inside output_dir: a name that is absolute or climbs
// out (".."), or a folder on the way that is a symbolic link to elsewhere.
fs::path OutputPath(const fs::path& output_dir, const fs::path& file) {
  if (file.empty() || file.is_absolute() || file.has_root_name()) return {};
  for (const fs::path& part : file) {
    if (part == ".." || part == ".") return {};
  }
  const fs::path path = output_dir / file;
  return Within(path.parent_path(), output_dir) ? path : fs::path();
}

// Written whole under a temporary name, flushed to disk, then renamed into place (a rename
// replaces a symbolic link at `path`, never what it points to). The temporary file is created
// afresh and never through a symbolic link.
bool WriteFile(const fs::path& path, const std::string& bytes) {
  std::error_code error;
  fs::create_directories(path.parent_path(), error);
  const fs::path temporary = path.string() + ".part";
  fs::remove(temporary, error);  // a link there is removed, not followed
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        0644);
  FILE* f = fd < 0 ? nullptr : ::fdopen(fd, "wb");
  if (f == nullptr) {
    if (fd >= 0) ::close(fd);
    return false;
  }
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() &&
                  std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  if (std::fclose(f) != 0 || !ok) return false;
  fs::rename(temporary, path, error);
  return !error;
}

json Record(const std::string& file, const std::string& bytes, const std::string& settings) {
  const uLong crc =
      crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size()));
  return {{"file", file}, {"bytes", bytes.size()}, {"crc32", crc}, {"settings", settings}};
}

class FolderJob {
 public:
  FolderJob(const FolderJobOptions& o, TranslatorClient& client) : o_(o), client_(client) {}
  ~FolderJob() {
    if (journal_ != nullptr) std::fclose(journal_);
  }
  FolderJob(const FolderJob&) = delete;
  FolderJob& operator=(const FolderJob&) = delete;

  FolderJobResult Run() {
    if (!Prepare()) {
      r_.outcome = FolderJobResult::kUsage;
      return r_;
    }
    g_interrupted = false;
    std::signal(SIGINT, OnSignal);
    std::signal(SIGTERM, OnSignal);
    const int n = std::max(1, std::min<int>(o_.concurrency, static_cast<int>(todo_.size())));
    std::vector<std::thread> workers;
    for (int i = 0; i < n; ++i) workers.emplace_back([this] { Work(); });
    absl::Time last = absl::Now();
    while (done_.load() < static_cast<int64_t>(todo_.size()) && !stopped_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (g_interrupted) Stop(FolderJobResult::kStopped, "interrupted");
      if (absl::Now() - last >= o_.progress_interval) {
        last = absl::Now();
        Progress();
      }
    }
    for (std::thread& worker : workers) worker.join();
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    if (r_.outcome == FolderJobResult::kDone && r_.failed > 0) {
      r_.outcome = FolderJobResult::kSomeFailed;
    }
    Log(absl::StrCat("documents: ", r_.documents, ", translated ", r_.translated, ", resumed ",
                     r_.resumed, ", failed ", r_.failed,
                     "; other files left alone: ", r_.other_files));
    return r_;
  }

 private:
  // Lists the documents and reads the journal; false (with a message) for a usage error.
  bool Prepare() {
    std::error_code error;
    if (!fs::is_directory(o_.input_dir, error)) {
      Log(absl::StrCat("--input_dir '", o_.input_dir, "' is not a folder"));
      return false;
    }
    if (Within(o_.output_dir, o_.input_dir)) {
      Log("--output_dir must not be --input_dir or inside it (its files would be read as input)");
      return false;
    }
    std::vector<std::string> files;
    if (!ListDocuments(&files)) return false;
    r_.documents = static_cast<int64_t>(files.size());
    fs::create_directories(o_.output_dir, error);
    journal_path_ = (fs::path(o_.output_dir) / kJournal).string();
    if (o_.resume) ReadJournal();
    journal_ = std::fopen(journal_path_.c_str(), o_.resume ? "a" : "w");
    if (error || journal_ == nullptr) {
      Log(absl::StrCat("cannot write in --output_dir '", o_.output_dir, "'"));
      return false;
    }
    todo_ = std::move(files);
    return true;
  }

  // The documents under --input_dir, sorted, as paths relative to it. Subfolders are walked but
  // not symbolic links to folders; a symbolic link to a file outside --input_dir is left alone
  // (its content is not the folder's to send). False (with a message) when it cannot be listed.
  bool ListDocuments(std::vector<std::string>* files) {
    std::error_code error;
    for (auto it = fs::recursive_directory_iterator(
             o_.input_dir, fs::directory_options::skip_permission_denied, error);
         !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
      if (!it->is_regular_file(error)) continue;
      // The entry's own name under --input_dir (fs::relative would resolve a link: its target's).
      const fs::path relative = it->path().lexically_relative(o_.input_dir);
      if (!IsDocument(it->path())) {
        ++r_.other_files;
        continue;
      }
      if (it->is_symlink(error) && !Within(it->path(), o_.input_dir)) {
        Log(absl::StrCat(relative.string(), ": a symbolic link out of --input_dir: left alone"));
        ++r_.other_files;
        continue;
      }
      files->push_back(relative.string());
    }
    if (error) {
      Log(absl::StrCat("cannot list --input_dir '", o_.input_dir, "': ", error.message()));
      return false;
    }
    std::sort(files->begin(), files->end());
    return true;
  }

  void ReadJournal() {
    std::ifstream in(journal_path_);
    std::string line;
    while (std::getline(in, line)) {
      json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (record.is_object() && record.contains("file")) {
        journaled_[record["file"].get<std::string>()] = record;  // a torn last line: skipped
      }
    }
  }

  void Work() {
    while (!stopped_.load()) {
      const size_t i = next_.fetch_add(1);
      if (i >= todo_.size()) return;
      One(todo_[i]);
      ++done_;
    }
  }

  void One(const std::string& file) {
    const fs::path input = fs::path(o_.input_dir) / file;
    const fs::path output = OutputPath(o_.output_dir, file);
    if (output.empty()) {
      return Failed(file, "its translation would be written outside --output_dir");
    }
    std::string bytes;
    if (!ReadFile(input, &bytes)) return Failed(file, "cannot be read");
    const json record = Record(file, bytes, o_.settings);
    auto journaled = journaled_.find(file);
    std::error_code error;
    if (journaled != journaled_.end() && journaled->second == record && fs::exists(output, error)) {
      std::lock_guard<std::mutex> lock(mu_);
      ++r_.resumed;
      return;
    }
    glossa::v1::TranslateDocumentResponse response;
    const grpc::Status status = client_.TranslateDocument(file, std::move(bytes), file, &response);
    if (!status.ok()) {
      const std::string why =
          absl::StrCat(CodeName(status.error_code()), ": ", status.error_message());
      if (ScopeOf(status.error_code()) == ErrorScope::kSegment) return Failed(file, why);
      return Stop(ScopeOf(status.error_code()) == ErrorScope::kJob ? FolderJobResult::kUsage
                                                                   : FolderJobResult::kStopped,
                  absl::StrCat(file, ": ", why));
    }
    if (!WriteFile(output, response.content())) {
      return Stop(FolderJobResult::kStopped, absl::StrCat("cannot write ", output.string()));
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++r_.translated;
    const std::string line = record.dump() + "\n";
    std::fputs(line.c_str(), journal_);
    std::fflush(journal_);
    ::fsync(fileno(journal_));
  }

  void Failed(const std::string& file, const std::string& why) {
    Log(absl::StrCat(file, ": ", why));
    std::lock_guard<std::mutex> lock(mu_);
    ++r_.failed;
  }

  void Stop(FolderJobResult::Outcome outcome, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_.exchange(true)) return;
    Log(absl::StrCat("stopping: ", why, "; rerun with --resume to continue"));
    r_.outcome = outcome;
    client_.Stop();
  }

  void Progress() {
    std::lock_guard<std::mutex> lock(mu_);
    Log(absl::StrFormat("%d/%d documents (%d translated, %d resumed, %d failed)", done_.load(),
                        r_.documents, r_.translated, r_.resumed, r_.failed));
  }

  const FolderJobOptions& o_;
  TranslatorClient& client_;
  std::vector<std::string> todo_;
  std::map<std::string, json> journaled_;
  std::string journal_path_;
  FILE* journal_ = nullptr;
  std::atomic<size_t> next_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<bool> stopped_{false};
  std::mutex mu_;
  FolderJobResult r_;
};

}  // namespace

FolderJobResult RunFolderJob(const FolderJobOptions& options, TranslatorClient& client) {
  FolderJob job(options, client);
  return job.Run();
}

}  // namespace glossa::batch
