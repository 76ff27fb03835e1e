// Whole files: read one, or replace one atomically. The one place that writes a file other
// threads or processes may read meanwhile (compile cache artefacts, exports, the worker's outbox).
//
// All functions are thread-safe and report failures as Status with the path and errno text;
// none throws.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace ak {

// The whole content of `path`, bytes as they are. kNotFound when it cannot be opened,
// kUnavailable when reading fails part way.
Result<std::string> read_file(const std::string& path);

// The last `bytes` bytes of `path` (all of it when shorter; "" when it cannot be read): the tail of
// a log, without reading what comes before it.
std::string read_tail(const std::string& path, size_t bytes);

// Writes `data` to `path` (created or truncated) in place: for files nobody reads while they are
// written (scratch inputs of a compiler). A symbolic link at `path` is refused (kUnavailable), never
// written through. kUnavailable on failure.
Status write_file(const std::string& path, std::string_view data);

// Replaces `path` with `data` atomically: the data goes to a temporary file in the same directory
// (".<name>.tmp-<pid>-<n>", unique across threads and processes), is fsynced, and the temporary is
// renamed over `path`. A reader sees the old content or the new, never a part, and after a crash
// the file holds one of them (the directory entry itself is not fsynced: a crash right after the
// rename may leave the old content). The temporary is removed on failure. A symbolic link at
// `path` or at the temporary's name is replaced, never written through. kUnavailable on failure.
Status write_file_atomically(const std::string& path, std::string_view data);

}  // namespace ak
