#!/bin/sh
# Builds sluice's Debian packages with dpkg-deb alone (docs/install.md,
# docs/design/0028-packaging.md), into BUILD_DIR/packages/:
#   sluice_<version>_amd64.deb         the service: /usr/bin/sluice (stripped),
#                                      /usr/lib/sluice/libduckdb.so, the systemd unit,
#                                      /etc/sluice/sluice.yaml, the docs
#   sluice-dbgsym_<version>_amd64.deb  sluice's debug information under
#                                      /usr/lib/debug/.build-id (gdb finds it by build id)
# Depends lists the Debian packages of the libraries the binary and libduckdb.so link.
# Usage: scripts/make-deb.sh [BUILD_DIR [OUT_DIR]]
#   BUILD_DIR default build/release (its sluice is built first unless SLUICE_DEB_NO_BUILD=1);
#   OUT_DIR default BUILD_DIR/packages.
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build/release}" && pwd)
OUT="${2:-$BUILD/packages}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
STAGE="$OUT/stage"

[ "${SLUICE_DEB_NO_BUILD:-}" = 1 ] || cmake --build "$BUILD" --target sluice >/dev/null
rm -rf "$STAGE"
mkdir -p "$STAGE/sluice" "$STAGE/dbgsym/usr/lib" "$OUT"
DESTDIR="$STAGE/sluice" cmake --install "$BUILD" --prefix /usr >/dev/null
mv "$STAGE/sluice/usr/lib/debug" "$STAGE/dbgsym/usr/lib/debug"

# The installed binary names its commit (and finds its libduckdb.so through $ORIGIN).
info=$("$STAGE/sluice/usr/bin/sluice" version)
upstream=$(echo "$info" | sed -n 's/^sluice //p')
commit=$(echo "$info" | sed -n 's/^commit //p' | sed 's/-dirty$/.dirty/')
when=$(TZ=UTC git -C "$SRC" log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S 2>/dev/null ||
  date -u +%Y%m%d%H%M%S)
version="${upstream}~git${when}.${commit}-1"
arch=$(dpkg --print-architecture)

# The Debian packages that ship the libraries the files link, "pkg (>= upstream version)"
# each, one per line in $1; fails naming a library no package ships.
needed_packages() {
  list="$1"
  shift
  : >"$list"
  # The files' own NEEDED entries (not their libraries' dependencies), resolved by ldd as
  # the loader will (libduckdb.so through $ORIGIN: ours, skipped below).
  for file in "$@"; do
    needed=$(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd' ')
    ldd "$file" | awk -v needed=" $needed " '$2 == "=>" && $3 ~ /^\// &&
      index(needed, " " $1 " ") { print $3 }'
  done | sort -u >"$list.paths"
  while read -r path; do
    case "$path" in "$STAGE"/*) continue ;; esac
    real=$(readlink -f "$path")
    pkg=""
    for p in "$path" "$real" "/usr$path" "${path#/usr}" "/usr$real" "${real#/usr}"; do
      pkg=$(dpkg -S "$p" 2>/dev/null | head -1 | cut -d: -f1,2 | sed 's/:$//; s/: .*//')
      [ -n "$pkg" ] && break
    done
    if [ -z "$pkg" ]; then
      echo "make-deb: no Debian package ships $path" >&2
      return 1
    fi
    # The version installed here, without its Debian revision (an epoch stays).
    v=$(dpkg-query -W -f='${Version}\n' "$pkg" | head -1 | sed 's/-[^-]*$//; s/+.*$//')
    echo "${pkg%%:*} (>= $v)" >>"$list"
  done <"$list.paths"
  rm -f "$list.paths"
}
needed_packages "$OUT/depends" "$STAGE/sluice/usr/bin/sluice" \
  "$STAGE/sluice/usr/lib/sluice/libduckdb.so"
# procps: /bin/kill of the unit's ExecReload; passwd: useradd in the postinst.
depends=$( (sort -u "$OUT/depends"; echo "passwd"; echo "procps") | paste -sd, | sed 's/,/, /g')
rm -f "$OUT/depends"
build_id=$(readelf -n "$STAGE/sluice/usr/bin/sluice" | sed -n 's/.*Build ID: //p')

# sluice
D="$STAGE/sluice/DEBIAN"
mkdir -p "$D"
cp "$SRC/packaging/debian/postinst" "$SRC/packaging/debian/prerm" "$SRC/packaging/debian/postrm" "$D/"
chmod 0755 "$D/postinst" "$D/prerm" "$D/postrm"
echo /etc/sluice/sluice.yaml >"$D/conffiles"
size=$(du -sk --exclude=DEBIAN "$STAGE/sluice" | cut -f1)
cat >"$D/control" <<CONTROL
Package: sluice
Version: $version
Architecture: $arch
Maintainer: sluice developers <sluice@localhost>
Installed-Size: $size
Depends: $depends
Section: database
Priority: optional
Homepage: https://github.com/sluice
Description: Kafka-compatible broker, SQL pipelines and SQL over lake tables
 sluice is one binary: a Kafka-compatible broker with its own storage engine,
 SQL pipelines (DuckDB SQL over JSON messages, results to sinks, exactly once),
 and a query server answering SQL over Apache Iceberg tables, Parquet files and
 live topics to any Postgres client. Runs as the systemd service sluice.service.
CONTROL
(cd "$STAGE/sluice" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | sort |
  xargs md5sum >DEBIAN/md5sums)

# sluice-dbgsym
D="$STAGE/dbgsym/DEBIAN"
mkdir -p "$D"
dbg_size=$(du -sk --exclude=DEBIAN "$STAGE/dbgsym" | cut -f1)
cat >"$D/control" <<CONTROL
Package: sluice-dbgsym
Version: $version
Architecture: $arch
Maintainer: sluice developers <sluice@localhost>
Installed-Size: $dbg_size
Depends: sluice (= $version)
Section: debug
Priority: optional
Build-Ids: $build_id
Description: debug symbols for sluice
 The debug information of /usr/bin/sluice, for gdb and perf (by build id).
CONTROL
(cd "$STAGE/dbgsym" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | sort |
  xargs md5sum >DEBIAN/md5sums)

rm -f "$OUT"/sluice_*.deb "$OUT"/sluice-dbgsym_*.deb
deb="$OUT/sluice_${version}_${arch}.deb"
dbg="$OUT/sluice-dbgsym_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$STAGE/sluice" "$deb" >/dev/null
# The debug sections are compressed already (zlib): xz would spend minutes for little.
dpkg-deb --root-owner-group -Zgzip -z1 --build "$STAGE/dbgsym" "$dbg" >/dev/null
rm -rf "$STAGE"
echo "$deb: $(du -k "$deb" | cut -f1) KiB, installed $size KiB"
echo "$dbg: $(du -k "$dbg" | cut -f1) KiB, installed $dbg_size KiB"
echo "Depends: $depends"
