// Run files (tools/config_file.h), read and written with toml++ (Debian's libtomlplusplus-dev).
// CLI11's own config files are not used: Debian 12's CLI11 2.1 reads them for the top-level
// command only (not for `train`), reads a subset of TOML, and its errors name neither the file
// nor the line.
#include "config_file.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "tandem/error.h"

namespace tandem::tools {

RunFileFlags& run_file_flags() {
  static RunFileFlags flags;
  return flags;
}

void add_run_file_options(CLI::App* c) {
  c->add_option(
      "--config", run_file_flags().config,
      "Read flags from this TOML run file: one `key = value` line per flag, the key the flag's "
      "name "
      "with _ for - (batch_size = 64); flags on the command line override it (docs/run-files.md)");
  c->add_flag(
      "--print-config", run_file_flags().print_config,
      "Write the resolved configuration (command line, --config file, defaults) as a run file to "
      "standard output and exit without training");
}

namespace {

enum class Kind { flag, integer, number, text };

Kind kind_of(const CLI::Option* o) {
  if (o->get_expected_max() == 0) return Kind::flag;  // takes no value
  const std::string t = o->get_type_name().substr(0, o->get_type_name().find(':'));
  if (t == "INT" || t == "UINT") return Kind::integer;
  if (t == "FLOAT") return Kind::number;
  return Kind::text;
}

bool is_list(const CLI::Option* o) {
  return o->get_expected_max() > 0 && o->get_items_expected_max() > 1;
}

// --num-workers and --prefetch-factor take "auto" (-1 in TrainConfig).
bool takes_auto(const CLI::Option* o) {
  return o->get_type_name().find("auto->-1") != std::string::npos;
}

// Options that are not run settings: help and the run file's own.
bool excluded(const CLI::App* c, const CLI::Option* o) {
  return o == c->get_help_ptr() || o == c->get_help_all_ptr() || o->get_lnames().empty() ||
         o->check_lname("config") || o->check_lname("print-config");
}

std::string key_of(const CLI::Option* o) {
  std::string k = o->get_lnames().front();
  std::replace(k.begin(), k.end(), '-', '_');
  return k;
}

const char* expected(Kind k, bool list) {
  switch (k) {
    case Kind::flag:
      return "true or false";
    case Kind::integer:
      return list ? "an array of integers" : "an integer";
    case Kind::number:
      return list ? "an array of numbers" : "a number";
    case Kind::text:
      return list ? "an array of strings" : "a string";
  }
  return "";
}

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date or time";
  }
}

// The command-line text of one TOML value for an option of kind `k`, or false when the type
// does not fit.
bool scalar_text(const toml::node& n, Kind k, bool auto_ok, std::string& out) {
  switch (k) {
    case Kind::flag:
      if (!n.is_boolean()) return false;
      out = n.as_boolean()->get() ? "true" : "false";
      return true;
    case Kind::integer:
      if (n.is_integer()) {
        out = fmt::format("{}", n.as_integer()->get());
        return true;
      }
      if (auto_ok && n.is_string() && n.as_string()->get() == "auto") {
        out = "auto";
        return true;
      }
      return false;
    case Kind::number:
      if (n.is_integer())
        out = fmt::format("{}", n.as_integer()->get());
      else if (n.is_floating_point())
        out = fmt::format("{}", n.as_floating_point()->get());
      else
        return false;
      return true;
    case Kind::text:
      if (!n.is_string()) return false;
      out = n.as_string()->get();
      return true;
  }
  return false;
}

// A run file is a few KiB of TOML: anything but a regular file (a directory, a FIFO that
// blocks, /dev/zero that never ends) or one past this size is refused before it is read.
constexpr std::uintmax_t kMaxRunFileBytes = 1 << 20;

std::string read_text(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st))
    throw_error(ErrorCode::io, "config",
                fmt::format("{}: cannot read: {}", path, ec ? ec.message() : std::strerror(ENOENT)));
  if (!std::filesystem::is_regular_file(st))
    throw_error(ErrorCode::invalid_argument, "config",
                fmt::format("{}: not a regular file: expected a TOML run file", path));
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxRunFileBytes)
    throw_error(ErrorCode::invalid_argument, "config",
                fmt::format("{}: {} bytes: expected a TOML run file of at most {} bytes", path, size,
                            kMaxRunFileBytes));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw_error(ErrorCode::io, "config",
                fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  std::string text(kMaxRunFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad())
    throw_error(ErrorCode::io, "config",
                fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxRunFileBytes)  // grew while being read
    throw_error(ErrorCode::invalid_argument, "config",
                fmt::format("{}: more than {} bytes: expected a TOML run file", path, kMaxRunFileBytes));
  return text;
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

void apply_run_file(CLI::App* c, const std::string& path) { apply_run_text(c, read_text(path), path); }

void apply_run_text(CLI::App* c, const std::string& text, const std::string& path) {
  toml::table table;
  try {
    table = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw_error(ErrorCode::invalid_argument, "config",
                fmt::format("{}:{}:{}: TOML syntax error: {}", path, e.source().begin.line,
                            e.source().begin.column, one_line(std::string(e.description()))));
  }
  // In file order, so that the first bad line is the one reported.
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (const auto& [k, v] : table) entries.emplace_back(&k, &v);
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.first->source().begin < b.first->source().begin;
  });
  for (const auto& entry : entries) {
    const toml::key* k = entry.first;  // plain names: clang 14 cannot capture structured bindings
    const toml::node* v = entry.second;
    const std::string key(k->str());
    const auto fail = [&](const std::string& what) {
      throw_error(ErrorCode::invalid_argument, "config",
                  fmt::format("{}:{}: key '{}': {}", path, k->source().begin.line, key, what));
    };
    const std::string name = key.find('-') == std::string::npos ? key : "";
    std::string flag = "--" + name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    CLI::Option* opt = name.empty() ? nullptr : c->get_option_no_throw(flag);
    if (opt && excluded(c, opt)) opt = nullptr;
    if (!opt) {
      std::string hint = "expected the name of a `tandem " + c->get_name() + "` flag with _ for -";
      std::string underscored = key;
      std::replace(underscored.begin(), underscored.end(), '-', '_');
      hint += name.empty() ? fmt::format(" ('{}')", underscored) : " (e.g. batch_size)";
      fail(v->is_table() ? "run files have no sections: " + hint : "unknown key: " + hint);
    }
    if (opt->count() > 0) continue;  // the command line wins
    const Kind kind = kind_of(opt);
    const bool list = is_list(opt);
    std::vector<std::string> inputs;
    std::string s;
    if (list && v->is_array()) {
      for (const toml::node& e : *v->as_array()) {
        if (!scalar_text(e, kind, false, s))
          fail(fmt::format("expected {}, got an array holding {}", expected(kind, true),
                           type_name(e)));
        inputs.push_back(s);
      }
      if (inputs.empty()) continue;  // an empty list: the flag's default
    } else if (!list && scalar_text(*v, kind, takes_auto(opt), s)) {
      inputs.push_back(s);
    } else {
      fail(fmt::format("expected {}{}, got {}", expected(kind, list),
                       takes_auto(opt) ? " or \"auto\"" : "", type_name(*v)));
    }
    try {
      opt->add_result(inputs);
      opt->run_callback();
    } catch (const CLI::ParseError& e) {
      const std::string what = one_line(e.what());
      // CLI11's "Could not convert: --epochs = 3000000000": a number the flag's type cannot hold.
      fail(what.rfind("Could not convert", 0) == 0
               ? fmt::format("{} cannot hold {}", flag, fmt::join(inputs, ", "))
               : what);
    }
  }
}

namespace {

// One value of an option as TOML.
std::string toml_value(const std::string& v, Kind kind, bool auto_ok) {
  if (kind == Kind::integer) {
    int64_t i = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), i);
    if (ec == std::errc() && p == v.data() + v.size())
      return auto_ok && i == -1 ? toml_value("auto", Kind::text, false) : fmt::format("{}", i);
  } else if (kind == Kind::number) {
    double d = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
    if (ec == std::errc() && p == v.data() + v.size()) {
      std::string s = fmt::format("{}", d);
      if (s.find_first_of(".eni") == std::string::npos) s += ".0";  // a float, not an integer
      return s;
    }
  }
  std::ostringstream out;
  out << toml::value<std::string>(v);
  return out.str();
}

}  // namespace

std::string resolved_config(const CLI::App* c) {
  std::string out =
      fmt::format("# tandem {}: resolved configuration (tandem {} --config FILE reads it)\n",
                  c->get_name(), c->get_name());
  for (const CLI::Option* o : c->get_options()) {
    if (excluded(c, o)) continue;
    const Kind kind = kind_of(o);
    if (kind == Kind::flag) {
      out +=
          fmt::format("{} = {}\n", key_of(o), o->count() > 0 && o->as<bool>() ? "true" : "false");
      continue;
    }
    std::vector<std::string> values = o->results();
    if (values.empty() && !o->get_default_str().empty()) values = {o->get_default_str()};
    values.erase(std::remove(values.begin(), values.end(), std::string()), values.end());
    if (values.empty()) continue;  // not set, no default
    std::string v;
    for (const std::string& x : values)
      v += (v.empty() ? "" : ", ") + toml_value(x, kind, takes_auto(o));
    out += fmt::format("{} = {}\n", key_of(o), is_list(o) ? "[" + v + "]" : v);
  }
  return out;
}

}  // namespace tandem::tools
