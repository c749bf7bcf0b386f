#!/usr/bin/env bash
# Records the cassettes the test suite replays:
# - the real harnesses, into tests/fixtures/cassettes/<harness>/<scenario>/: the pinned Claude
#   Code, Codex and Gemini CLI (scripts/install-peers.sh) under spex's PTY host
#   (`spex launch --record`) against the tests' fake model servers, one session per scenario
#   (tool, permission, question, interrupt, failed), driven by tests/it/record_cassettes.rs;
# - the terminal conformance set, into tests/fixtures/cassettes/terminal/<case>/: the synthetic
#   programs of tests/fixtures/terminal-programs/conformance.py and the real `top`, `less` and
#   `vim`, each run under `spex cassette record` and driven by its `<case>.steps.json`.
#
#   scripts/record-cassettes.sh              # every harness and every case
#   scripts/record-cassettes.sh claude vim   # these harnesses and cases
#
# A case's `assertions.json` is kept across a new recording and bound to it (its manifest id and
# content digest) when every predicate holds for it (`spex cassette spec --rebind`): a new
# recording that breaks its spec fails here, before it is committed. A case without one gets a
# starter spec (`spex cassette spec`) to tighten.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
programs=$root/tests/fixtures/terminal-programs
dest=$root/tests/fixtures/cassettes/terminal
cargo build --quiet
spex=$root/target/$(rustc -vV | sed -n 's/^host: //p')/debug/spex
scripts/install-terminal-programs.sh

harnesses=()
if [ $# -gt 0 ]; then
    cases=()
    for c in "$@"; do
        case $c in
            claude | codex | gemini) harnesses+=("$c") ;;
            *) cases+=("$c") ;;
        esac
    done
else
    harnesses=(claude codex gemini)
    cases=()
    for f in "$programs"/*.steps.json; do
        cases+=("$(basename "$f" .steps.json)")
    done
fi

# A scratch folder is the program's checkout and home (scrubbed as `$TREE`): a file to page
# through, the synthetic programs, no user config.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$programs/conformance.py" "$work/"
seq -f 'line %03g of the file' 1 200 >"$work/lines.txt"
vim=$(command -v vim || command -v vim.tiny)

# The harnesses: each scenario's spec is kept across a new recording and bound to it, as below.
if [ ${#harnesses[@]} -gt 0 ]; then
    scripts/install-peers.sh
    for h in "${harnesses[@]}"; do
        cargo test --quiet --test it "record_cassettes::record_$h" -- --ignored --exact
        for dir in "$root/tests/fixtures/cassettes/$h"/*/; do
            dir=${dir%/}
            "$spex" cassette check "$dir"
            if [ -f "$dir/assertions.json" ]; then
                "$spex" cassette spec --rebind "$dir"
            else
                "$spex" cassette spec "$dir"
            fi
        done
        "$spex" cassette test "$root/tests/fixtures/cassettes/$h"
    done
fi

for case in "${cases[@]}"; do
    dir=$dest/$case
    kept=
    if [ -f "$dir/assertions.json" ]; then
        kept=$work/$case.spec.json
        cp "$dir/assertions.json" "$kept"
    fi
    rm -rf "$dir"
    mkdir -p "$dest"
    rows=24 cols=80
    case $case in
        top) argv=(sh -c 'sleep 600 & p=$!; top -d 1 -p $p; kill $p') ;;
        less) argv=(less lines.txt) ;;
        vim) argv=("$vim" -u NONE -i NONE -N lines.txt) ;;
        *) argv=(python3 conformance.py "$case") ;;
    esac
    (cd "$work" && HOME=$work LESSHISTFILE=- "$spex" cassette record --out "$dir" \
        --rows "$rows" --cols "$cols" --script "$programs/$case.steps.json" -- "${argv[@]}")
    "$spex" cassette check "$dir"
    if [ -n "$kept" ]; then
        cp "$kept" "$dir/assertions.json"
        "$spex" cassette spec --rebind "$dir"
    else
        "$spex" cassette spec "$dir"
    fi
done
"$spex" cassette test "$dest"
