// FramedEncoder (framed_encoder.h).
#include "schema/framed_encoder.h"

#include <fmt/format.h>

#include "duck/data_chunk.h"
#include "schema/avro/avro_format.h"
#include "schema/protobuf/protobuf_format.h"

namespace sluice::schema {

struct FramedEncoder::Impl {
  std::shared_ptr<SchemaSource> source;
  PayloadFormat format = PayloadFormat::kAvro;
  std::string subject;
  // The columns the encoder was made for (their SQL text), its schema and id.
  std::string columns_sql;
  int32_t id = 0;
  std::shared_ptr<avro::Parsed> avro;
  std::shared_ptr<protobuf::Parsed> proto;
  std::unique_ptr<RowEncoder> encoder;
  std::string buffer;

  Status Prepare(const std::vector<Column>& columns);
};

FramedEncoder::FramedEncoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FramedEncoder::~FramedEncoder() = default;
int32_t FramedEncoder::schema_id() const { return impl_->id; }

Result<std::unique_ptr<FramedEncoder>> FramedEncoder::Create(std::shared_ptr<SchemaSource> source,
                                                             PayloadFormat format,
                                                             std::string subject) {
  if (format != PayloadFormat::kAvro && format != PayloadFormat::kProtobuf) {
    return InvalidArgumentError("the kafka sink writes avro or protobuf, not {}",
                                PayloadFormatName(format));
  }
  auto impl = std::make_unique<Impl>();
  impl->source = std::move(source);
  impl->format = format;
  impl->subject = std::move(subject);
  return std::unique_ptr<FramedEncoder>(new FramedEncoder(std::move(impl)));
}

// The schema of these columns, registered, and its encoder.
Status FramedEncoder::Impl::Prepare(const std::vector<Column>& columns) {
  std::string name = subject;
  if (name.ends_with("-value")) name.resize(name.size() - 6);
  // Avro and Protobuf names: letters, digits and underscores, not starting with a digit.
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "r_" + name;
  std::string text;
  if (format == PayloadFormat::kAvro) {
    ASSIGN_OR_RETURN(text, avro::SchemaForColumns(columns, name));
    ASSIGN_OR_RETURN(avro::Parsed p, avro::Parse(text, {}));
    avro = std::make_shared<avro::Parsed>(std::move(p));
    ASSIGN_OR_RETURN(encoder, avro::MakeRowEncoder(*avro, columns));
  } else {
    ASSIGN_OR_RETURN(text, protobuf::SchemaForColumns(columns, name));
    ASSIGN_OR_RETURN(protobuf::Parsed p, protobuf::Parse(text, {}));
    proto = std::make_shared<protobuf::Parsed>(std::move(p));
    const int first[] = {0};
    ASSIGN_OR_RETURN(encoder, protobuf::MakeRowEncoder(*proto, first, columns));
  }
  // A Protobuf schema importing well-known types references them as subjects of their
  // own (registered first), as Confluent's serializers do: clients resolve imports only
  // through references.
  std::vector<registry::SchemaReference> refs;
  if (proto != nullptr) {
    for (const protobuf::Import& imp : proto->file->imports) {
      const char* known = protobuf::WellKnownFileText(imp.path);
      if (known == nullptr) continue;
      ASSIGN_OR_RETURN(SchemaSource::Registered dep,
                       source->Register(imp.path, SchemaType::kProtobuf, known));
      refs.push_back({imp.path, imp.path, dep.version});
    }
  }
  ASSIGN_OR_RETURN(
      SchemaSource::Registered r,
      source->Register(subject,
                       format == PayloadFormat::kAvro ? SchemaType::kAvro : SchemaType::kProtobuf,
                       text, refs));
  id = r.id;
  return Status::OK();
}

Status FramedEncoder::Encode(duck::Connection& conn, std::string_view table,
                             const std::function<Status(std::string_view)>& emit) {
  Impl& d = *impl_;
  ASSIGN_OR_RETURN(duck::QueryResult rows,
                   conn.Query(fmt::format("SELECT * FROM {}", duck::QuoteIdentifier(table))));
  std::vector<Column> columns;
  std::string columns_sql;
  std::vector<duck::LogicalType> types = rows.column_logical_types();
  for (size_t i = 0; i < rows.column_count(); ++i) {
    columns_sql +=
        fmt::format("{} {},", duck::QuoteIdentifier(rows.column_name(i)), types[i].ToSql());
    columns.push_back({rows.column_name(i), types[i].Copy()});
  }
  if (d.encoder == nullptr || columns_sql != d.columns_sql) {
    d.encoder.reset();
    Status st = d.Prepare(columns);
    if (!st.ok()) {
      return Status(st.code(), fmt::format("{} schema for subject '{}': {}",
                                           PayloadFormatName(d.format), d.subject, st.message()));
    }
    d.columns_sql = std::move(columns_sql);
  }
  std::vector<duck::DataChunk> chunks = rows.TakeChunks();
  for (const duck::DataChunk& chunk : chunks) {
    for (uint64_t r = 0; r < chunk.size(); ++r) {
      d.buffer.clear();
      WriteFraming(d.id, &d.buffer);
      if (d.format == PayloadFormat::kProtobuf) d.buffer.push_back('\0');  // message [0]
      RETURN_IF_ERROR(d.encoder->Encode(chunk, 0, r, &d.buffer));
      RETURN_IF_ERROR(emit(d.buffer));
    }
  }
  return Status::OK();
}

}  // namespace sluice::schema
