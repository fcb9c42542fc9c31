#!/usr/bin/env bash
# End to end through glossa-translate: translations, n-best output, glossaries, errors.
#   cli_test.sh GLOSSA_TRANSLATE MODEL SHARED_DIR
set -u
bin=$1 model=$2 shared=$3
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }

if [ ! -f "$shared/golden/dev.es" ]; then
  echo "skipped: needs $shared/golden (the shared test data)"; exit 77
fi
head -n 40 "$shared/golden/dev.es" >"$tmp/in.es"
head -n 40 "$shared/golden/greedy.hyp" >"$tmp/greedy.ref"
head -n 40 "$shared/golden/beam4.hyp" >"$tmp/beam4.ref"

"$bin" --model "$model" --beam_size 1 --max_output_tokens 256 <"$tmp/in.es" >"$tmp/greedy.out" 2>"$tmp/err"
check "greedy from stdin equals Hugging Face" 'cmp -s "$tmp/greedy.out" "$tmp/greedy.ref"'
"$bin" --model "$model" --input "$tmp/in.es" --output "$tmp/beam4.out" --max_output_tokens 256 2>"$tmp/progress"
check "beam 4 (the default) from --input to --output" 'cmp -s "$tmp/beam4.out" "$tmp/beam4.ref"'
check "progress on stderr for files" 'grep -q "40 lines" "$tmp/progress"'
"$bin" --model "$model" --num_hypotheses 3 --input "$tmp/in.es" >"$tmp/nbest.out" 2>/dev/null
check "n-best prints 3 lines per sentence" '[ "$(wc -l <"$tmp/nbest.out")" = 120 ]'
check "n-best lines are INDEX ||| TEXT ||| SCORE" 'head -1 "$tmp/nbest.out" | grep -Eq "^0 \|\|\| .+ \|\|\| -[0-9.]+$"'
printf 'Hola\n\nAdiós\n' | "$bin" --model "$model" >"$tmp/empty.out"
check "an empty line gives an empty line, order kept" '[ "$(sed -n 2p "$tmp/empty.out")" = "" ] && [ "$(wc -l <"$tmp/empty.out")" = 3 ]'
"$bin" --model /nonexistent.glossa </dev/null 2>"$tmp/err"; rc=$?
check "missing model: exit 2 and a message naming the file" '[ $rc = 2 ] && grep -q "/nonexistent.glossa" "$tmp/err"'
head -c 5000 /dev/urandom >"$tmp/garbage.glossa"
"$bin" --model "$tmp/garbage.glossa" </dev/null 2>"$tmp/err"; rc=$?
check "garbage model: exit 2, not a Glossa model file" '[ $rc = 2 ] && grep -q "not a Glossa model file" "$tmp/err"'
"$bin" --model "$model" --beam_size 2 --num_hypotheses 3 </dev/null 2>"$tmp/err"; rc=$?
check "num_hypotheses > beam_size is refused" '[ $rc = 2 ] && grep -q "num_hypotheses 3 exceeds beam_size 2" "$tmp/err"'
# A glossary: "Moisés" (matched case-folded) must come out as "Moses", which beam search alone
# leaves out; the line without the term translates as without a glossary.
printf 'Y Jehová habló a Moisés.\nY dijo Dios: Sea la luz.\n' >"$tmp/gloss.es"
printf '# es\ten\n\nmoisés\tMoses\n' >"$tmp/gloss.tsv"
"$bin" --model "$model" <"$tmp/gloss.es" >"$tmp/plain.out" 2>/dev/null
"$bin" --model "$model" --glossary "$tmp/gloss.tsv" <"$tmp/gloss.es" >"$tmp/gloss.out" 2>"$tmp/err"
check "a glossary term is forced (Moses), only where its source occurs" \
  '! grep -q Moses "$tmp/plain.out" && [ "$(sed -n 1p "$tmp/gloss.out" | grep -o Moses)" = Moses ] && [ "$(sed -n 2p "$tmp/gloss.out")" = "$(sed -n 2p "$tmp/plain.out")" ]'
printf 'moisés\tMoses\nluz light\n' >"$tmp/bad.tsv"
"$bin" --model "$model" --glossary "$tmp/bad.tsv" <"$tmp/gloss.es" >/dev/null 2>"$tmp/err"; rc=$?
check "a glossary line without a tab: exit 2, the line named" '[ $rc = 2 ] && grep -q "bad.tsv'"'"' line 2: expected SOURCE<TAB>TARGET" "$tmp/err"'
"$bin" --model "$model" --glossary "$tmp/gloss.tsv" --beam_size 1 <"$tmp/gloss.es" >/dev/null 2>"$tmp/err"; rc=$?
check "a glossary with greedy search is refused" '[ $rc = 2 ] && grep -q "a glossary is enforced by beam search" "$tmp/err"'
"$bin" --help >"$tmp/help" 2>&1
check "--help documents every flag (--batch_size, --chunk_lines, --glossary)" 'grep -q -- "--batch_size" "$tmp/help" && grep -q -- "--chunk_lines" "$tmp/help" && grep -q -- "--glossary" "$tmp/help"'
exit $fail
