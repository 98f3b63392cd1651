#!/usr/bin/env bash
# Fails when a C++ file of the tree is not formatted as .clang-format says, with the tool
# pinned by scripts/setup.sh (clang-format 14), so formatting does not change with the
# tool's version. `make format` formats them.
set -euo pipefail
cd "$(dirname "$0")/.."
tool=clang-format-14
command -v "$tool" >/dev/null 2>&1 || { echo "check-format: $tool is missing (scripts/setup.sh installs it)" >&2; exit 1; }
git ls-files '*.h' '*.cc' | xargs "$tool" --dry-run --Werror
echo "check-format: every .h and .cc file is formatted"
