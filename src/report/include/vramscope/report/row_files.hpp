// src/report/include/vramscope/report/row_files.hpp -- CSV and JSON-lines files of samples, using the report formatters
//
// The rows are exactly what `vramscope --csv` and `watch --format csv|jsonl` print (src/report/):
// one formatter, several destinations, so an exported file and a live stream never disagree.
#pragma once

#include <memory>
#include <string>

#include "vramscope/exporters/sink.hpp"
#include "vramscope/report/csv_report.hpp"

namespace vramscope::report {

/// A CSV file: the header once, then one row per device (or per process) of every sample.
class CsvFileSink : public exporters::Sink {
 public:
  /// Creates `path` (0600). Throws vramscope::Error on failure.
  CsvFileSink(const std::string& path, CsvRows rows, bool overwrite);
  void write(const SystemSample& sample) override;
  void flush() override;

 private:
  CsvRows m_rows;
  std::unique_ptr<exporters::BufferedFile> m_file;
};

/// A JSON-lines file: one `vramscope --json` document per sample, one per line.
class JsonlFileSink : public exporters::Sink {
 public:
  /// Creates `path` (0600). Throws vramscope::Error on failure.
  JsonlFileSink(const std::string& path, bool overwrite);
  void write(const SystemSample& sample) override;
  void flush() override;

 private:
  std::unique_ptr<exporters::BufferedFile> m_file;
};

}  // namespace vramscope::report
