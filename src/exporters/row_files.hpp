// src/exporters/row_files.hpp -- CSV and JSON-lines files of samples, using the report formatters
//
// The rows are exactly what `vramscope --csv` and `watch --format csv|jsonl` print (src/report/):
// one formatter, several destinations, so an exported file and a live stream never disagree.
#pragma once

#include <memory>
#include <string>

#include "exporters/sink.hpp"
#include "report/csv_report.hpp"

namespace vramscope::exporters {

/// A CSV file: the header once, then one row per device (or per process) of every sample.
class CsvFileSink : public Sink {
 public:
  /// Creates `path` (0600). Throws vramscope::Error on failure.
  CsvFileSink(const std::string& path, report::CsvRows rows, bool overwrite);
  void write(const SystemSample& sample) override;
  void flush() override;

 private:
  report::CsvRows m_rows;
  std::unique_ptr<BufferedFile> m_file;
};

/// A JSON-lines file: one `vramscope --json` document per sample, one per line.
class JsonlFileSink : public Sink {
 public:
  /// Creates `path` (0600). Throws vramscope::Error on failure.
  JsonlFileSink(const std::string& path, bool overwrite);
  void write(const SystemSample& sample) override;
  void flush() override;

 private:
  std::unique_ptr<BufferedFile> m_file;
};

}  // namespace vramscope::exporters
