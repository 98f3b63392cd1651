// Packed ordering keys (D8, D14): the latest-row rewrite's ORDER BY keys and tie-breaking
// columns as fields of one BIGINT or HUGEINT whose minimum is the row that ranks first,
// with the columns decoded back from it; and the types' facts the rewrites size parts by.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "query/rewrite/common.h"

namespace sluice::query::rewrite {

std::string Int128ToString(__int128 v);

// Bytes a value of `type` takes in an aggregate's state (a rough figure for N, D7).
int64_t TypeWidth(const std::string& type);

// Types whose hash() agrees with GROUP BY / PARTITION BY equality (D5). VARCHAR only when no
// collation can apply (checked separately).
bool HashableKeyType(const std::string& t);

// An ORDER BY key's value as an integer that orders the same (D8), or "" when the type has
// none. `e` names the column.
std::string OrdinalExpr(const std::string& type, const std::string& e);
// An ordinal (OrdinalExpr) back as a value of `type`, or "" when the type has no exact way back.
std::string DecodeOrdinal(const std::string& type, const std::string& e);

// The fewest hash bits that break ties in a packed key (D3): two tied rows that differ in the
// kept columns collide with probability 2^-48.
constexpr int kMinTieHashBits = 48;

// A DOUBLE or FLOAT tie-breaking column is packed as its value in hundredths (money, two
// decimals) when that is exact. One scale: each costs a third of the statistics scan's time.
constexpr const char* kDoubleScale = "100";

// DOUBLE and FLOAT: packed by their value in hundredths (ExactField), not by an ordinal.
bool IsScaledFloat(const std::string& type);
// The column `q` of such a type in hundredths, rounded (a DOUBLE); and a DOUBLE `scaled`
// back as a value of the type. A value packs exactly when ScaledBack(Scaled(q)) = q.
std::string Scaled(const std::string& type, const std::string& q);
std::string ScaledBack(const std::string& type, const std::string& scaled);

// One field of a packed key: a non-negative code below 2^width, placed at `shift`. The key
// is computed only where every field's guard holds (one CASE per row, not one per field:
// the guards are what catch an input that changed after the statistics scan).
struct PackedField {
  std::string guard;  // SQL over the part's input: the value lies within the scanned bounds
  std::string code;   // SQL: the code, BIGINT arithmetic when width <= 63
  int width = 0;
  int shift = 0;
  // The column's value from its code (SQL over the code); empty when it has no way back.
  std::function<std::string(const std::string& code)> decode;
};

// A field of codes 0..hi-lo (+1 for NULL) ordering as the ordinal `ord` of column `col`
// does, descending or not, NULLs first or last.
PackedField OrdinalField(const std::string& col, const std::string& ord, const std::string& type,
                         __int128 lo, __int128 hi, bool has_null, bool descending,
                         bool nulls_first);

// A field for a column that is NULL in every row: width 0, decoded as NULL.
PackedField AllNullField(const std::string& col, const std::string& type);

// A tie-breaking column packed exactly (D14), from its statistics starting at `at`, or
// nullopt. Integer-like columns by their ordinal; a DOUBLE or FLOAT by its value in hundredths
// when every value comes back exactly from that integer (and none is -0.0, NaN or infinite).
std::optional<PackedField> ExactField(const Column& col,
                                      const std::vector<std::optional<std::string>>& s, size_t at,
                                      int64_t rows);

// The key over packed fields (most significant first) and `hash_bits` low bits of `hash`:
// fields are summed in BIGINT words of up to 63 bits, the words joined in one HUGEINT (a
// BIGINT key when all fit in 63 bits), and the sum is taken only where every guard holds.
// Sets each field's shift.
std::string PackedKey(std::vector<PackedField*>& fields, const std::string& hash, int hash_bits,
                      const std::string& changed);

}  // namespace sluice::query::rewrite
