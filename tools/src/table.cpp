#include "table.hpp"

#include <algorithm>

namespace h2::tools {

void Table::print(std::ostream& out, int indent) const {
  std::vector<size_t> widths(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);

  auto line = [&](const std::vector<std::string>& row) {
    std::string text(static_cast<size_t>(indent), ' ');
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      text += cell;
      if (i + 1 < widths.size()) text += std::string(widths[i] - cell.size() + 2, ' ');
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << '\n';
  };
  line(header_);
  std::vector<std::string> rule;
  for (size_t width : widths) rule.emplace_back(width, '-');
  line(rule);
  for (const auto& row : rows_) line(row);
}

}  // namespace h2::tools
