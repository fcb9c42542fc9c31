#include "server/batch/batch_job.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/batch/io/journal.h"
#include "server/batch/io/log.h"
#include "server/batch/progress.h"
#include "server/batch/queue.h"

namespace glossa::batch {
namespace {

using json = nlohmann::json;

std::atomic<bool> g_interrupted{false};

void OnSignal(int signal) {
  g_interrupted = true;
  std::signal(signal, SIG_DFL);  // a second Ctrl-C kills at once
}

// One input line on its way through.
struct Segment {
  int64_t line = 0;     // 0-based
  std::string content;  // without the line ending; copied as is when it cannot be parsed
  std::string ending;
  absl::StatusOr<Record> record;
  std::string translation;
  int64_t tokens = 0;
  std::optional<FailedLine> failure;

  bool NeedsTranslation() const { return record.ok() && !record->text.empty(); }
};

struct Batch {
  int64_t seq = 0;
  std::vector<Segment> segments;
  int64_t input_end = 0;  // byte offset after the last segment's line
  grpc::Status status;    // not OK: the batch was not translated and the job stops
};

std::string LinesLabel(const std::vector<Segment*>& segments) {
  const int64_t first = segments.front()->line + 1, last = segments.back()->line + 1;
  return first == last ? absl::StrCat("line ", first) : absl::StrCat("lines ", first, "-", last);
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

// Invariants (main thread): batches 0..written_seq_-1 are in the output, in order; the ones
// from written_seq_ to next_seq_-1 are at the workers (in_flight_) or translated and waiting in
// reorder_; there are at most 4 * concurrency of them. The journal's last checkpoint names a
// prefix of what is in the output.
class Job {
 public:
  Job(const JobOptions& options, TranslatorClient& client) : o_(options), client_(client) {}
  int Run();

 private:
  // Where this run starts: the shard's beginning, or the journal's last checkpoint.
  absl::Status Plan();
  absl::Status CheckResumable(const JournalState& state);
  // Asks the servers for an empty request with the job's settings: a wrong model or option is
  // reported before any file is touched.
  int Preflight();
  absl::Status OpenFiles();
  void RunPipeline();
  void WorkerLoop();
  grpc::Status TranslateSegments(const std::vector<Segment*>& segments);
  // Reads and queues batches while fewer than the window are outstanding.
  void Dispatch();
  std::optional<Batch> ReadBatch();
  void Accept(Batch batch);
  void WriteReady();
  void WriteBatch(const Batch& batch);
  void MaybeCheckpoint(bool force);
  void Progress(bool force);
  void StopJob(const std::string& why);
  ProgressCounts Counts() const;
  int Finish();

  const JobOptions& o_;
  TranslatorClient& client_;
  json job_;  // the journal's description of the job
  std::string journal_path_;
  LineRange range_;

  // Where this run starts.
  int64_t start_line_ = 0;
  int64_t start_input_offset_ = -1;  // -1: skip from the file's beginning to range_.first
  int64_t start_output_offset_ = 0;
  bool resumed_ = false;
  bool already_complete_ = false;

  // The pipeline, touched by the main thread only (workers use the queues).
  LineReader reader_;
  Queue<Batch> todo_, results_;
  int64_t next_seq_ = 0;     // of the next batch read
  int64_t written_seq_ = 0;  // of the next batch to write
  int in_flight_ = 0;        // batches at the workers
  std::map<int64_t, Batch> reorder_;
  bool input_done_ = false;
  bool stopping_ = false;

  // The output and its journal.
  int out_fd_ = -1;
  JournalWriter journal_;
  int64_t lines_written_ = 0;  // 0-based number of the next line to write
  int64_t input_offset_ = 0;   // where that line starts in the input
  int64_t output_offset_ = 0;
  int64_t checkpointed_line_ = 0;
  std::string pending_failures_;  // journal records for the next checkpoint
  std::vector<FailedLine> failed_;
  absl::Time last_checkpoint_ = absl::InfinitePast();

  // Progress.
  absl::Time started_ = absl::Now();
  absl::Time last_progress_ = absl::Now();
  int64_t tokens_ = 0;
};

int Job::Run() {
  if (absl::Status s = Plan(); !s.ok()) {
    Log(s.message());
    return kExitUsage;
  }
  if (already_complete_) {
    Log(absl::StrCat(o_.output, " is already complete (", range_.size(), " lines, ", failed_.size(),
                     " failed); nothing to do"));
    return failed_.empty() ? kExitOk : kExitFailed;
  }
  if (const int rc = Preflight(); rc != kExitOk) return rc;
  if (absl::Status s = OpenFiles(); !s.ok()) {
    Log(s.message());
    return kExitUsage;
  }
  RunPipeline();
  return Finish();
}

absl::Status Job::Plan() {
  absl::StatusOr<InputSize> size = ScanInput(o_.input);
  if (!size.ok()) return size.status();
  range_ = ShardLines(o_.shard, size->lines);
  job_ = o_.settings;
  job_["input_bytes"] = size->bytes;
  job_["input_lines"] = size->lines;
  job_["format"] = FormatName(o_.format.format);
  job_["column"] = o_.format.column;
  job_["output_column"] = o_.format.output_column;
  job_["field"] = o_.format.field;
  job_["output_field"] = o_.format.output_field;
  job_["shard"] = {o_.shard.index, o_.shard.count};
  job_["lines"] = {range_.first, range_.end};
  journal_path_ = JournalPath(o_.output);
  start_line_ = range_.first;
  if (!o_.resume) return absl::OkStatus();
  absl::StatusOr<JournalState> state = ReadJournal(journal_path_);
  if (absl::IsNotFound(state.status())) {
    Log(absl::StrCat("--resume: no journal ", journal_path_, " yet; starting from the beginning"));
    return absl::OkStatus();
  }
  if (!state.ok()) return state.status();
  return CheckResumable(*state);
}

absl::Status Job::CheckResumable(const JournalState& state) {
  if (state.job != job_) {
    return absl::FailedPreconditionError(absl::StrCat(
        journal_path_,
        " belongs to another job (input, format, shard, glossary or decoding settings "
        "differ):\n  journal: ",
        state.job.dump(), "\n  now:     ", job_.dump(), "\nrun without --resume to start over"));
  }
  if (state.checkpoints.empty()) return absl::OkStatus();  // nothing written yet: start over
  const Checkpoint& last = state.checkpoints.back();
  const int64_t size = FileSize(o_.output);
  if (size < 0) {
    return absl::NotFoundError(absl::StrCat(o_.output, " is missing but its journal says ",
                                            last.output_offset,
                                            " bytes were written; run "
                                            "without --resume to start over"));
  }
  if (size < last.output_offset || (state.complete && size != last.output_offset)) {
    return absl::DataLossError(
        absl::StrCat(o_.output, " is ", size, " bytes but its journal says ", last.output_offset,
                     " were written: it was changed since; run without --resume to start over"));
  }
  resumed_ = true;
  already_complete_ = state.complete;
  failed_ = state.failed;
  start_line_ = last.last_line;  // 1-based last line written = 0-based next line
  start_input_offset_ = last.input_offset;
  start_output_offset_ = last.output_offset;
  return absl::OkStatus();
}

int Job::Preflight() {
  std::vector<TranslatedText> ignored;
  const grpc::Status status = client_.Translate(std::vector<std::string>(o_.texts_per_request, ""),
                                                "checking the servers", &ignored);
  if (status.ok()) return kExitOk;
  const std::string why = absl::StrCat(CodeName(status.error_code()), ": ", status.error_message());
  if (ScopeOf(status.error_code()) == ErrorScope::kRetry) {
    Log(absl::StrCat("cannot reach the servers (", why, "); nothing was written"));
    return kExitStopped;
  }
  Log(absl::StrCat("the servers refuse the job: ", why,
                   " (check --model, --source_language, "
                   "--target_language, --beam_size, --max_output_tokens, --texts_per_request); nothing was written"));
  return kExitUsage;
}

absl::Status Job::OpenFiles() {
  if (resumed_) {
    out_fd_ = open(o_.output.c_str(), O_WRONLY | O_CLOEXEC);
    if (out_fd_ < 0 || ftruncate(out_fd_, start_output_offset_) != 0 ||
        lseek(out_fd_, start_output_offset_, SEEK_SET) < 0) {
      return absl::UnavailableError(absl::StrCat("cannot reopen --output '", o_.output, "'"));
    }
    absl::Status s = journal_.OpenForAppend(journal_path_);
    if (s.ok()) s = journal_.Append(ResumeRecord(start_line_ + 1, start_output_offset_));
    if (!s.ok()) return s;
    Log(absl::StrCat("resuming ", o_.output, " at line ", start_line_ + 1, " (",
                     start_line_ - range_.first, " of ", range_.size(), " lines done)"));
  } else {
    // The journal first: killed between the two, --resume finds no checkpoint and starts over.
    if (absl::Status s = journal_.Create(journal_path_, HeaderRecord(job_)); !s.ok()) return s;
    out_fd_ = open(o_.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_fd_ < 0) {
      return absl::UnavailableError(absl::StrCat("cannot write --output '", o_.output, "'"));
    }
  }
  lines_written_ = checkpointed_line_ = start_line_;
  output_offset_ = start_output_offset_;
  if (start_input_offset_ >= 0) {
    input_offset_ = start_input_offset_;
    return reader_.Open(o_.input, start_input_offset_, start_line_);
  }
  if (absl::Status s = reader_.Open(o_.input, 0, 0); !s.ok()) return s;
  if (!reader_.SkipTo(range_.first)) return absl::DataLossError("the input changed while read");
  input_offset_ = reader_.offset();
  return absl::OkStatus();
}

void Job::RunPipeline() {
  g_interrupted = false;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::vector<std::thread> workers;
  for (int i = 0; i < o_.concurrency; ++i) workers.emplace_back([this] { WorkerLoop(); });
  while (true) {
    if (!stopping_) Dispatch();
    WriteReady();
    if (in_flight_ == 0 && (stopping_ || (input_done_ && next_seq_ == written_seq_))) break;
    if (in_flight_ > 0) {
      if (std::optional<Batch> batch = results_.PopFor(std::chrono::milliseconds(100))) {
        Accept(*std::move(batch));
        WriteReady();
      }
    }
    if (g_interrupted && !stopping_) StopJob("interrupted");
    MaybeCheckpoint(/*force=*/false);
    Progress(/*force=*/false);
  }
  todo_.Close();
  for (std::thread& worker : workers) worker.join();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

void Job::WorkerLoop() {
  while (std::optional<Batch> batch = todo_.Pop()) {
    std::vector<Segment*> segments;
    for (Segment& s : batch->segments) {
      if (s.NeedsTranslation()) segments.push_back(&s);
    }
    batch->status = TranslateSegments(segments);
    results_.Push(*std::move(batch));
  }
}

grpc::Status Job::TranslateSegments(const std::vector<Segment*>& segments) {
  std::vector<std::string> texts;
  for (const Segment* s : segments) texts.push_back(s->record->text);
  std::vector<TranslatedText> out;
  const grpc::Status status = client_.Translate(texts, LinesLabel(segments), &out);
  if (status.ok()) {
    for (size_t i = 0; i < segments.size(); ++i) {
      segments[i]->translation = std::move(out[i].text);
      segments[i]->tokens = out[i].tokens;
    }
    return status;
  }
  if (ScopeOf(status.error_code()) != ErrorScope::kSegment) return status;
  if (segments.size() == 1) {  // this segment is the problem: it fails for good
    segments[0]->failure = FailedLine{
        segments[0]->line + 1, std::string(CodeName(status.error_code())), status.error_message()};
    return grpc::Status::OK;
  }
  for (Segment* s : segments) {  // find which segments the error is about
    if (grpc::Status one = TranslateSegments({s}); !one.ok()) return one;
  }
  return grpc::Status::OK;
}

void Job::Dispatch() {
  const int64_t window = 4 * static_cast<int64_t>(o_.concurrency);
  while (!input_done_ && next_seq_ - written_seq_ < window) {
    std::optional<Batch> batch = ReadBatch();
    if (!batch) break;
    bool send = false;
    for (const Segment& s : batch->segments) send = send || s.NeedsTranslation();
    if (send) {
      todo_.Push(*std::move(batch));
      ++in_flight_;
    } else {
      reorder_.emplace(batch->seq, *std::move(batch));
    }
  }
}

std::optional<Batch> Job::ReadBatch() {
  Batch batch;
  std::string line;
  bool had_newline = false;
  while (static_cast<int>(batch.segments.size()) < o_.texts_per_request &&
         reader_.line() < range_.end) {
    Segment s;
    s.line = reader_.line();
    if (!reader_.Next(&line, &had_newline)) {
      StopJob(absl::StrCat("the input ended at line ", s.line, "; it had ", range_.end,
                           " lines when the job started"));
      break;
    }
    const LineParts parts = SplitLineEnding(line, had_newline);
    s.content = std::string(parts.content);
    s.ending = std::string(parts.ending);
    s.record = ParseRecord(s.content, o_.format);
    if (!s.record.ok()) {
      s.failure =
          FailedLine{s.line + 1, "MALFORMED_LINE", std::string(s.record.status().message())};
    }
    batch.segments.push_back(std::move(s));
  }
  input_done_ = input_done_ || reader_.line() >= range_.end || stopping_;
  if (batch.segments.empty()) return std::nullopt;
  batch.seq = next_seq_++;
  batch.input_end = reader_.offset();
  return batch;
}

void Job::Accept(Batch batch) {
  --in_flight_;
  if (batch.status.ok()) {
    reorder_.emplace(batch.seq, std::move(batch));
    return;
  }
  if (stopping_) return;  // cancelled by the stop
  const std::vector<Segment*> label = {&batch.segments.front(), &batch.segments.back()};
  StopJob(absl::StrCat(LinesLabel(label), ": ", CodeName(batch.status.error_code()), ": ",
                       batch.status.error_message()));
}

void Job::WriteReady() {
  for (auto it = reorder_.begin(); it != reorder_.end() && it->first == written_seq_;
       it = reorder_.erase(it)) {
    WriteBatch(it->second);
    ++written_seq_;
  }
}

void Job::WriteBatch(const Batch& batch) {
  std::string out;
  for (const Segment& s : batch.segments) {
    if (s.failure) {
      Log(absl::StrCat(
          "line ", s.failure->line, ": ", s.failure->code, ": ", s.failure->message,
          s.record.ok() ? " (written with an empty translation)" : " (copied unchanged)"));
      pending_failures_ += FailedRecord(*s.failure);
      failed_.push_back(*s.failure);
    }
    out += s.record.ok() ? RenderRecord(*s.record, s.translation, o_.format) : s.content;
    out += s.ending;
    tokens_ += s.tokens;
  }
  if (absl::Status w = WriteAll(out_fd_, out, o_.output); !w.ok()) {
    Log(w.message());
    std::_Exit(kExitStopped);  // the journal still names only bytes that were written
  }
  output_offset_ += static_cast<int64_t>(out.size());
  lines_written_ = batch.segments.back().line + 1;
  input_offset_ = batch.input_end;
}

void Job::MaybeCheckpoint(bool force) {
  const absl::Time now = absl::Now();
  if (lines_written_ == checkpointed_line_) return;
  if (!force && now - last_checkpoint_ < o_.checkpoint_interval) return;
  // The output reaches the disk before the journal names its length.
  absl::Status s = fdatasync(out_fd_) == 0
                       ? absl::OkStatus()
                       : absl::UnavailableError(absl::StrCat("cannot sync ", o_.output));
  if (s.ok()) {
    s = journal_.Append(
        pending_failures_ +
        CheckpointRecord({checkpointed_line_ + 1, lines_written_, input_offset_, output_offset_}));
  }
  if (!s.ok()) {
    Log(s.message());
    std::_Exit(kExitStopped);
  }
  pending_failures_.clear();
  checkpointed_line_ = lines_written_;
  last_checkpoint_ = now;
}

void Job::Progress(bool force) {
  const absl::Time now = absl::Now();
  if (!force && now - last_progress_ < o_.progress_interval) return;
  last_progress_ = now;
  Log(FormatProgress(Counts()));
}

void Job::StopJob(const std::string& why) {
  if (stopping_) return;
  stopping_ = true;
  Log(absl::StrCat("stopping: ", why));
  client_.Stop();
}

ProgressCounts Job::Counts() const {
  ProgressCounts c;
  c.done = lines_written_ - range_.first;
  c.total = range_.size();
  c.this_run = lines_written_ - start_line_;
  c.tokens = tokens_;
  c.failed = static_cast<int64_t>(failed_.size());
  c.seconds = absl::ToDoubleSeconds(absl::Now() - started_);
  return c;
}

int Job::Finish() {
  MaybeCheckpoint(/*force=*/true);
  const bool complete = lines_written_ == range_.end && !stopping_;
  if (complete) {
    if (absl::Status s = journal_.Append(CompleteRecord(range_.size(), failed_.size())); !s.ok()) {
      Log(s.message());
    }
  }
  close(out_fd_);
  Log(absl::StrCat(complete ? "done: " : "stopped: ", FormatSummary(Counts())));
  if (!complete) {
    Log(absl::StrCat(o_.output, " holds lines ", range_.first + 1, "-", lines_written_,
                     "; rerun with --resume to continue from line ", lines_written_ + 1));
    return kExitStopped;
  }
  if (!failed_.empty()) {
    Log(absl::StrCat(failed_.size(), " segment", failed_.size() == 1 ? "" : "s",
                     " could not be translated (listed above and in ", journal_path_, ")"));
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace

int RunJob(const JobOptions& options, TranslatorClient& client) {
  Job job(options, client);
  return job.Run();
}

}  // namespace glossa::batch
