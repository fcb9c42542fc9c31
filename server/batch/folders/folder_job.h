// glossa-batch --input_dir DIR --output_dir OUT: every document under DIR (the formats of
// server/files/read_document.h, by extension, in subfolders too) translated with gRPC's
// TranslateDocument into the same path under OUT, its formatting kept. Files go --concurrency at
// once, each written whole (to a temporary name, then renamed) and recorded in
// OUT/.glossa-batch-folder.journal with its size, CRC-32 and the job's settings; --resume skips
// the files the journal holds with the same size, checksum and settings whose output is there.
// Other files in DIR are left alone and counted.
#ifndef GLOSSA_SERVER_BATCH_FOLDERS_FOLDER_JOB_H_
#define GLOSSA_SERVER_BATCH_FOLDERS_FOLDER_JOB_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "server/batch/client/client.h"

namespace glossa::batch {

struct FolderJobOptions {
  std::string input_dir, output_dir;
  int concurrency = 2;
  bool resume = false;
  std::string settings;  // the model, languages: a file journaled with others is translated again
  absl::Duration progress_interval = absl::Seconds(5);
};

struct FolderJobResult {
  enum Outcome { kDone, kSomeFailed, kUsage, kStopped } outcome = kDone;
  int64_t documents = 0;   // files of a supported format
  int64_t translated = 0;  // by this run
  int64_t resumed = 0;     // skipped: done by an earlier run
  int64_t failed = 0;      // refused by the server (a bad file): reported, the job goes on
  int64_t other_files = 0; // not a supported format: left alone
};

// Runs the job; messages on stderr (Log). Stops at SIGINT/SIGTERM, at a call whose retries run
// out and at an error about the whole job (kStopped, kUsage), keeping every file written.
FolderJobResult RunFolderJob(const FolderJobOptions& options, TranslatorClient& client);

}  // namespace glossa::batch

#endif  // GLOSSA_SERVER_BATCH_FOLDERS_FOLDER_JOB_H_
