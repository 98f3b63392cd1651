#include "query/copy_out.h"

#include <fmt/format.h>

#include <cctype>

#include "query/pg_protocol.h"

namespace sluice::query {

namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

// PGCOPY\n\377\r\n\0, then the flags and the header extension's length (both 0).
constexpr std::string_view kBinarySignature("PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0", 19);

}  // namespace

void AppendCopyText(std::string_view value, char delimiter, std::string& out) {
  size_t start = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    char c = value[i];
    char escaped = 0;
    if (static_cast<unsigned char>(c) < 0x20) {
      switch (c) {
        case '\b':
          escaped = 'b';
          break;
        case '\f':
          escaped = 'f';
          break;
        case '\n':
          escaped = 'n';
          break;
        case '\r':
          escaped = 'r';
          break;
        case '\t':
          escaped = 't';
          break;
        case '\v':
          escaped = 'v';
          break;
        default:
          if (c == delimiter) escaped = c;
      }
    } else if (c == '\\' || c == delimiter) {
      escaped = c;
    }
    if (escaped == 0) continue;
    out.append(value.substr(start, i - start));
    out += '\\';
    out += escaped;
    start = i + 1;
  }
  out.append(value.substr(start));
}

void AppendCopyCsv(std::string_view value, const CopyOptions& o, bool force, bool only_column,
                   std::string& out) {
  bool quote = force || value == o.null_string || (only_column && value == "\\.");
  for (size_t i = 0; !quote && i < value.size(); ++i) {
    char c = value[i];
    quote = c == o.delimiter || c == o.quote || c == '\n' || c == '\r';
  }
  if (!quote) {
    out.append(value);
    return;
  }
  out += o.quote;
  size_t start = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] != o.quote && value[i] != o.escape) continue;
    out.append(value.substr(start, i - start));
    out += o.escape;
    start = i;  // the character itself goes with the next run
  }
  out.append(value.substr(start));
  out += o.quote;
}

Result<CopyOutWriter> CopyOutWriter::Make(const CopyOptions& options,
                                          std::vector<ColumnEncoder> encoders,
                                          std::vector<std::string> names) {
  CopyOutWriter w(options, std::move(encoders), std::move(names));
  w.force_quote_.assign(w.names_.size(), options.force_quote_all);
  for (const std::string& f : options.force_quote) {
    bool found = false;
    for (size_t c = 0; c < w.names_.size(); ++c) {
      if (EqualsIgnoreCase(w.names_[c], f)) w.force_quote_[c] = found = true;
    }
    if (!found)
      return InvalidArgumentError("42P10: FORCE_QUOTE column \"{}\" not referenced by COPY", f);
  }
  return w;
}

void CopyOutWriter::Start(std::string& out) {
  const bool binary = options_.format == CopyFormat::kBinary;
  pg::MessageWriter w(out);
  w.Begin('H');
  w.Byte(binary ? 1 : 0);
  w.Int16(static_cast<int16_t>(encoders_.size()));
  for (size_t c = 0; c < encoders_.size(); ++c) w.Int16(binary ? 1 : 0);
  w.End();
  if (binary) {
    // As Postgres does: the signature goes in front of the first row's CopyData.
    binary_header_pending_ = true;
    return;
  }
  if (!options_.header) return;
  w.Begin('d');
  for (size_t c = 0; c < names_.size(); ++c) {
    if (c > 0) out += options_.delimiter;
    if (options_.format == CopyFormat::kCsv) {
      AppendCopyCsv(names_[c], options_, false, names_.size() == 1, out);
    } else {
      AppendCopyText(names_[c], options_.delimiter, out);
    }
  }
  out += '\n';
  w.End();
}

void CopyOutWriter::AppendRow(const std::vector<duck::Vector>& columns, uint64_t row,
                              std::string& out) {
  pg::MessageWriter w(out);
  w.Begin('d');
  if (options_.format == CopyFormat::kBinary) {
    if (binary_header_pending_) {
      out.append(kBinarySignature);
      binary_header_pending_ = false;
    }
    w.Int16(static_cast<int16_t>(encoders_.size()));
    // A field is what a DataRow holds: its length (-1 for NULL), then the send format.
    for (size_t c = 0; c < encoders_.size(); ++c) encoders_[c].Append(columns[c], row, true, out);
    w.End();
    return;
  }
  for (size_t c = 0; c < encoders_.size(); ++c) {
    if (c > 0) out += options_.delimiter;
    if (!columns[c].IsValid(row)) {
      out.append(options_.null_string);
      continue;
    }
    field_.clear();
    encoders_[c].Append(columns[c], row, false, field_);
    AppendField(std::string_view(field_).substr(4), c, out);
  }
  out += '\n';
  w.End();
}

void CopyOutWriter::AppendField(std::string_view value, size_t column, std::string& out) const {
  if (options_.format == CopyFormat::kCsv) {
    AppendCopyCsv(value, options_, force_quote_[column], encoders_.size() == 1, out);
  } else {
    AppendCopyText(value, options_.delimiter, out);
  }
}

void CopyOutWriter::Finish(std::string& out) {
  pg::MessageWriter w(out);
  if (options_.format == CopyFormat::kBinary) {
    w.Begin('d');
    if (binary_header_pending_) out.append(kBinarySignature);
    binary_header_pending_ = false;
    w.Int16(-1);
    w.End();
  }
  pg::WriteCopyDone(out);
}

}  // namespace sluice::query
