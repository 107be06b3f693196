#!/usr/bin/env bash
# Rewrites the lock files from pyproject.toml's ranges, with the sha256 of every file of each
# pinned release, for CPython 3.11 on Linux (the image's and CI's Python):
#   requirements/test.txt     runway's dependencies and the [test] extra (.ci/run installs it)
#   requirements/runtime.txt  runway's dependencies only, at the same versions (the Dockerfile)
#
#   requirements/refresh.sh                            # keep the pins, add/drop what changed
#   requirements/refresh.sh --upgrade                  # every package to its newest allowed
#   requirements/refresh.sh --upgrade-package uvicorn  # one package (repeat for more)
#
# pip-tools runs in a throwaway virtualenv; pip's own config (extra indexes, find-links of this
# machine) is ignored, so only PyPI's files are hashed. Commit both files with the change that
# needed them, after `pip install --require-hashes -r requirements/test.txt` and the suite.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [[ $version != 3.11 ]]; then
  echo "refresh.sh: the locks are for Python 3.11 (the image's); $python is $version" >&2
  echo "  run it as PYTHON=python3.11 requirements/refresh.sh" >&2
  exit 2
fi

tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
"$python" -m venv "$tools"
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1
"$tools/bin/pip" install --quiet "pip-tools==7.6.2"

compile=("$tools/bin/pip-compile" --quiet --no-config --generate-hashes --allow-unsafe
  --strip-extras --no-emit-index-url --no-emit-find-links --resolver=backtracking)
export CUSTOM_COMPILE_COMMAND="requirements/refresh.sh"
"${compile[@]}" --extra test --output-file requirements/test.txt "$@" pyproject.toml
# The runtime lock at the test lock's versions: what CI tests is what the image runs.
"${compile[@]}" --constraint requirements/test.txt --output-file requirements/runtime.txt \
  "$@" pyproject.toml
echo "requirements/test.txt and requirements/runtime.txt rewritten"
