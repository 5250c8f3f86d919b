// A plain-text table with aligned columns, for the command line's readable output.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace h2::tools {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  // Prints the header, a rule, and the rows, each line indented by `indent` spaces.
  void print(std::ostream& out, int indent = 2) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace h2::tools
