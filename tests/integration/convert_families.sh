#!/usr/bin/env bash
# Converts the shared M2M100, NLLB-200 and mBART-50 test models into OUT_DIR (float32, plus
# int8 and bfloat16 for the quality tests): the ctest fixture of the family tests.
#   convert_families.sh PYTHON GLOSSA_CONVERT SHARED_MODELS_DIR OUT_DIR
set -eu
python=$1 convert=$2 models=$3 out=$4
if [ ! -d "$models/opus-bible-nllb-es-en" ]; then
  echo "skipped: needs $models (the shared test models)"; exit 77
fi
mkdir -p "$out"
for family in m2m100 nllb mbart50; do
  input="$models/opus-bible-$family-es-en"
  # Reconverted only when the converter or the input changed.
  if [ ! -f "$out/$family.glossa" ] || [ "$convert" -nt "$out/$family.glossa" ] ||
     [ "$(dirname "$convert")/glossa_families.py" -nt "$out/$family.glossa" ]; then
    "$python" "$convert" --input "$input" --output "$out/$family.glossa"
  fi
done
