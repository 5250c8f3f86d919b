// The suite's outputs: report.json, junit.xml and certificate.json, the table for people, and the
// check of a certificate against a plugin file.
#include <openssl/evp.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <ostream>

#include "h2/error.hpp"
#include "h2/file_io.hpp"
#include "serialize.hpp"
#include "waivers.hpp"

namespace h2::conformance {

namespace {

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  write_file_atomically(path.string(), text);
}

std::string junit(const SuiteReport& report) {
  std::map<std::string, std::vector<const CaseResult*>> by_op;
  std::vector<std::string> order;
  for (const CaseResult& r : report.cases) {
    if (!by_op.count(r.op)) order.push_back(r.op);
    by_op[r.op].push_back(&r);
  }
  std::string xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"h2 conformance " +
                    xml_escape(report.plugin.name) + "\">\n";
  for (const std::string& op : order) {
    size_t failures = 0, errors = 0, skipped = 0;
    double seconds = 0;
    for (const CaseResult* r : by_op[op]) {
      failures += r->state == CaseState::fail;
      errors += r->state == CaseState::crashed || r->state == CaseState::timed_out;
      skipped += r->state == CaseState::not_supported || r->state == CaseState::waived;
      seconds += r->seconds;
    }
    char head[256];
    std::snprintf(
        head, sizeof head,
        "  <testsuite name=\"%s\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\" time=\"%.3f\">\n",
        xml_escape(op).c_str(), by_op[op].size(), failures, errors, skipped, seconds);
    xml += head;
    for (const CaseResult* r : by_op[op]) {
      char time[32];
      std::snprintf(time, sizeof time, "%.3f", r->seconds);
      xml += "    <testcase classname=\"h2.conformance." + xml_escape(op) + "\" name=\"" +
             xml_escape(r->dtype + " " + r->name) + "\" time=\"" + time + "\"";
      const std::string message = xml_escape(r->message);
      switch (r->state) {
        case CaseState::pass: xml += "/>\n"; break;
        case CaseState::fail: xml += ">\n      <failure message=\"" + message + "\"/>\n    </testcase>\n"; break;
        case CaseState::crashed:
        case CaseState::timed_out:
          xml += ">\n      <error type=\"" + std::string(state_name(r->state)) + "\" message=\"" + message +
                 "\"/>\n    </testcase>\n";
          break;
        case CaseState::not_supported:
        case CaseState::waived:
          xml += ">\n      <skipped message=\"" + std::string(state_name(r->state)) + ": " + message +
                 "\"/>\n    </testcase>\n";
          break;
      }
    }
    xml += "  </testsuite>\n";
  }
  return xml + "</testsuites>\n";
}

Json certificate(const SuiteReport& report) {
  Json totals = Json::object();
  for (CaseState s : {CaseState::pass, CaseState::fail, CaseState::not_supported, CaseState::waived, CaseState::crashed,
                      CaseState::timed_out})
    totals[state_name(s)] = report.count(s);
  Json waived = Json::array();
  for (const CaseResult& r : report.cases)
    if (r.state == CaseState::waived) waived.push_back(r.op + " " + r.dtype + " " + r.name);
  const std::filesystem::path waiver_file = default_waiver_file();
  return {{"certificate", "H2 plugin conformance"},
          {"suite_version", report.suite_version},
          {"mode", report.mode == Mode::full ? "full" : "quick"},
          {"date", report.date},
          {"abi", std::to_string(report.plugin.abi_major) + "." + std::to_string(report.plugin.abi_minor)},
          {"plugin",
           {{"name", report.plugin.name},
            {"version", report.plugin.version},
            {"file", std::filesystem::path(report.plugin.path).filename().string()},
            {"sha256", report.plugin.sha256}}},
          {"device", {{"index", report.plugin.device}, {"properties", to_json(report.plugin.properties)}}},
          {"totals", totals},
          {"waived_cases", waived},
          {"waiver_file_sha256", std::filesystem::exists(waiver_file) ? sha256_file(waiver_file) : ""},
          {"passed", report.passed()}};
}

}  // namespace

size_t SuiteReport::count(CaseState state) const {
  size_t n = 0;
  for (const CaseResult& r : cases) n += r.state == state;
  return n;
}

bool SuiteReport::passed() const {
  return count(CaseState::pass) > 0 && count(CaseState::fail) == 0 && count(CaseState::crashed) == 0 &&
         count(CaseState::timed_out) == 0;
}

std::string sha256_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(H2_STATUS_INVALID_ARGUMENT, "cannot read " + path.string());
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0)
    EVP_DigestUpdate(ctx, buffer, static_cast<size_t>(in.gcount()));
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx, digest, &length);
  EVP_MD_CTX_free(ctx);
  std::string hex;
  char byte[3];
  for (unsigned int i = 0; i < length; ++i) {
    std::snprintf(byte, sizeof byte, "%02x", digest[i]);
    hex += byte;
  }
  return hex;
}

void write_reports(const SuiteReport& report, const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw Error(H2_STATUS_INVALID_ARGUMENT, "cannot create report directory " + dir.string() + ": " + ec.message());
  write_file(dir / "report.json", to_json(report).dump(2) + "\n");
  write_file(dir / "junit.xml", junit(report));
  write_file(dir / "certificate.json", certificate(report).dump(2) + "\n");
}

void print_summary(const SuiteReport& report, std::ostream& out) {
  struct Row {
    size_t counts[6] = {};
    double worst = 0;
    std::string first_problem;
  };
  std::map<std::string, Row> rows;
  std::vector<std::string> order;
  for (const CaseResult& r : report.cases) {
    if (!rows.count(r.op)) order.push_back(r.op);
    Row& row = rows[r.op];
    ++row.counts[static_cast<int>(r.state)];
    for (const OutputError& e : r.outputs)
      if (std::isfinite(e.worst_ratio)) row.worst = std::max(row.worst, e.worst_ratio);
    if (row.first_problem.empty() && r.state != CaseState::pass && r.state != CaseState::not_supported)
      row.first_problem = r.dtype + " " + r.name + ": " + r.message;
  }
  char line[256];
  std::snprintf(line, sizeof line, "  %-24s %5s %5s %5s %6s %5s %7s %7s %9s\n", "OPERATOR", "CASES", "PASS", "FAIL",
                "WAIVED", "N/S", "CRASHED", "TIMEOUT", "WORST");
  out << "Conformance of " << report.plugin.name << " (" << report.plugin.properties.name << ", device "
      << report.plugin.device << "), suite " << report.suite_version << ", "
      << (report.mode == Mode::full ? "full" : "quick") << "\n"
      << line << "  " << std::string(87, '-') << "\n";
  for (const std::string& op : order) {
    const Row& row = rows[op];
    size_t total = 0;
    for (size_t c : row.counts) total += c;
    std::snprintf(line, sizeof line, "  %-24s %5zu %5zu %5zu %6zu %5zu %7zu %7zu %9.3f\n", op.c_str(), total,
                  row.counts[0], row.counts[1], row.counts[3], row.counts[2], row.counts[4], row.counts[5], row.worst);
    out << line;
  }
  out << "\n  WORST is the largest error / bound of any output (a pass needs <= 1).\n";
  bool any = false;
  for (const std::string& op : order) {
    if (rows[op].first_problem.empty()) continue;
    if (!any) out << "\nProblems (the first of each operator):\n";
    any = true;
    out << "  " << op << ": " << rows[op].first_problem << "\n";
  }
  out << "\n"
      << report.count(CaseState::pass) << " passed, " << report.count(CaseState::fail) << " failed, "
      << report.count(CaseState::crashed) << " crashed, " << report.count(CaseState::timed_out) << " timed out, "
      << report.count(CaseState::waived) << " waived, " << report.count(CaseState::not_supported)
      << " not supported: " << (report.passed() ? "CONFORMS" : "DOES NOT CONFORM") << "\n";
}

std::string verify_certificate(const std::filesystem::path& certificate_path,
                               const std::filesystem::path& plugin_path) {
  std::ifstream in(certificate_path);
  if (!in) return "cannot read certificate " + certificate_path.string();
  Json cert;
  try {
    cert = Json::parse(in);
  } catch (const std::exception& e) {
    return certificate_path.string() + " is not valid JSON: " + e.what();
  }
  for (const char* field :
       {"certificate", "suite_version", "mode", "date", "abi", "plugin", "device", "totals", "passed"})
    if (!cert.contains(field)) return "the certificate is incomplete: it has no \"" + std::string(field) + "\"";
  if (!cert["plugin"].contains("sha256") || !cert["plugin"]["sha256"].is_string())
    return "the certificate is incomplete: it names no plugin SHA-256";
  if (!std::filesystem::exists(plugin_path)) return "no plugin file at " + plugin_path.string();
  const std::string actual = sha256_file(plugin_path);
  const std::string recorded = cert["plugin"]["sha256"].get<std::string>();
  if (actual != recorded)
    return "the certificate is for another file: it records SHA-256 " + recorded + " but " + plugin_path.string() +
           " has " + actual;
  if (cert["suite_version"] != kSuiteVersion)
    return "the certificate was issued by suite " + cert["suite_version"].get<std::string>() + ", this is suite " +
           kSuiteVersion + "; run h2 conform again";
  size_t total = 0;
  for (const auto& [state, n] : cert["totals"].items()) total += n.get<size_t>();
  if (total == 0) return "the certificate is incomplete: it records no cases";
  if (!cert["passed"].get<bool>()) return "the certificate records a run that did not conform";
  return "";
}

}  // namespace h2::conformance
