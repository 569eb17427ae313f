// Run files: `tandem train --config run.toml` and `tandem train --print-config`
// (tools/config_file.cpp; docs/run-files.md).
// A run file is a TOML table of `key = value` lines, one per flag of `tandem train`: the key is
// the long flag without its dashes and with `_` for `-` (--batch-size is `batch_size`), the value
// a TOML integer, float, string, boolean (flags without a value) or array (flags that take a
// list, e.g. mean = [0.5, 0.5, 0.5]). Flags given on the command line override the file.
// Thread-safety: call from the thread that parses the command line.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace tandem::tools {

struct RunFileFlags {
  std::string config;         // --config FILE ("" = none)
  bool print_config = false;  // --print-config: write the resolved configuration and exit
};
RunFileFlags& run_file_flags();

/// Adds --config and --print-config to `c`.
void add_run_file_options(CLI::App* c);

/// Sets every option of `c` that the command line did not give from the run file at `path`.
/// Throws Error(io, "[config] <path>: cannot read: <reason>") for a missing or unreadable file;
/// Error(invalid_argument, "[config] <path>:<line>:<column>: TOML syntax error: ...") for a
/// file that is not TOML; Error(invalid_argument, "[config] <path>:<line>: key '<key>': ...")
/// for a key that names no flag (or a section), a value of the wrong TOML type, or a value the
/// flag refuses.
void apply_run_file(CLI::App* c, const std::string& path);

/// apply_run_file for a run file's `text`, its errors naming `path` (e.g. the checkpoint whose
/// recorded configuration it is).
void apply_run_text(CLI::App* c, const std::string& text, const std::string& path);

/// The resolved value of every option of `c` (given, from the run file, or its default) as a
/// run file, one `key = value` line per option in --help order; options without a value and
/// without a default are left out. `apply_run_file` reads it back to the same configuration.
std::string resolved_config(const CLI::App* c);

}  // namespace tandem::tools
