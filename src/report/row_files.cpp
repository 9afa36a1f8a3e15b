// src/report/row_files.cpp -- CSV and JSON-lines sinks over the report formatters
#include "vramscope/report/row_files.hpp"

#include "vramscope/report/json_report.hpp"

namespace vramscope::report {

CsvFileSink::CsvFileSink(const std::string& path, CsvRows rows, bool overwrite)
    : m_rows(rows), m_file(std::make_unique<exporters::BufferedFile>(path, overwrite)) {
  m_file->append_record(csv_header(rows));
}

void CsvFileSink::write(const SystemSample& sample) {
  m_file->append_record(csv_rows(sample, m_rows));
}

void CsvFileSink::flush() { m_file->flush(); }

JsonlFileSink::JsonlFileSink(const std::string& path, bool overwrite)
    : m_file(std::make_unique<exporters::BufferedFile>(path, overwrite)) {}

void JsonlFileSink::write(const SystemSample& sample) {
  // Streamed: the line of a wide sample is never held whole, nor built as one document.
  write_sample_json(sample, [this](std::string_view piece) { m_file->append_record(piece); });
  m_file->append_record("\n");
}

void JsonlFileSink::flush() { m_file->flush(); }

}  // namespace vramscope::report
