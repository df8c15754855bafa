#!/usr/bin/env bash
# zen_orbit with a TLE file (SGP4 scenario) end to end: propagate, windows with ground stations, the
# JSON form ("tle" relative to the JSON file), compare (baseline and ring) on the tiny Fashion-MNIST
# sample, and bad input answered by an error naming the file and line.
#   orbit_tle_cli_test.sh ZEN_ORBIT TLE_FILE DATA_DIR
set -euo pipefail
bin=$1 tle=$2 data=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# propagate: header, one row per satellite and step.
"$bin" propagate --tle "$tle" --minutes 10 --step 60 --out "$tmp/p.csv" 2>"$tmp/p.err"
head -1 "$tmp/p.csv" | grep -qx "sat,name,catalog,t_s,utc,x_km,y_km,z_km,vx_km_s,vy_km_s,vz_km_s" || fail "propagate header"
nsat=$(grep -c "^1 " "$tle")
[ "$(($(wc -l <"$tmp/p.csv") - 1))" = "$((nsat * 11))" ] || fail "propagate rows: $(wc -l <"$tmp/p.csv") for $nsat satellites x 11"

# windows: today's columns; --start moves t = 0 (the same pass comes 3600 s earlier).
"$bin" windows --tle "$tle" --propagator sgp4 --station 53.0,8.8 --station -25.89,27.69,1415 --mask 25 --days 0.5 \
  --out "$tmp/w.csv" 2>"$tmp/w.err"
head -1 "$tmp/w.csv" | grep -qx "sat,plane,slot,peer,start_s,end_s,max_dist_m" || fail "windows header"
[ "$(cut -d, -f4 "$tmp/w.csv" | sort -u | tr '\n' ' ')" = "0 1 peer " ] || fail "windows: not both stations"
start=$(grep -o "t = 0 is [^ ]*" "$tmp/w.err" | cut -d' ' -f5)
later=$(python3 -c "import datetime as d,sys; t=d.datetime.strptime(sys.argv[1],'%Y-%m-%dT%H:%M:%S.%fZ')+d.timedelta(hours=1); print(t.strftime('%Y-%m-%dT%H:%M:%S.%fZ'))" "$start")
"$bin" windows --tle "$tle" --start "$later" --station 53.0,8.8 --station -25.89,27.69,1415 --mask 25 --days 0.25 \
  --out "$tmp/w2.csv" 2>/dev/null
python3 - "$tmp/w.csv" "$tmp/w2.csv" <<'PY' || fail "windows with --start one hour later do not match"
import csv, sys
a = [r for r in csv.DictReader(open(sys.argv[1])) if 3700 < float(r["start_s"]) and float(r["end_s"]) < 3600 + 0.25 * 86400 - 100]
b = [(r["sat"], r["peer"], float(r["start_s"]) + 3600, float(r["end_s"]) + 3600) for r in csv.DictReader(open(sys.argv[2]))]
assert a, "no windows to compare"
missing = [r for r in a if not any(s == r["sat"] and p == r["peer"] and abs(x - float(r["start_s"])) < 0.01
                                   and abs(y - float(r["end_s"])) < 0.01 for s, p, x, y in b)]
assert not missing, missing[:3]
PY

# The JSON form: "tle" relative to the JSON file.
cp "$tle" "$tmp/sats.tle"
cat >"$tmp/sc.json" <<JSON
{"name": "starlink-json", "tle": "sats.tle", "elevation_mask_deg": 25,
 "servers": [{"type": "ground", "name": "bremen", "lat_deg": 53.0, "lon_deg": 8.8}]}
JSON
"$bin" windows --config "$tmp/sc.json" --days 0.5 --out "$tmp/wj.csv" 2>/dev/null
grep ',0,' "$tmp/w.csv" | awk -F, '$4 == 0' >"$tmp/w0.csv"
diff <(tail -n +2 "$tmp/wj.csv") "$tmp/w0.csv" >/dev/null || fail "JSON scenario windows differ from --tle --station"

# FL: baseline and ring over the real planes, with a ground station, one round.
"$bin" compare --tle "$tle" --station 53.0,8.8 --data-dir "$data" --rounds 1 --presets ka --train-limit 600 \
  --test-limit 200 >"$tmp/cmp.txt" 2>"$tmp/cmp.err" || { cat "$tmp/cmp.txt" "$tmp/cmp.err"; fail "compare --tle"; }
grep -q "^scenario .*: $nsat satellites in [0-9]* planes" "$tmp/cmp.txt" || { cat "$tmp/cmp.txt"; fail "compare header"; }
grep -q "^| baseline | " "$tmp/cmp.txt" && grep -q "^| ring | " "$tmp/cmp.txt" || { cat "$tmp/cmp.txt"; fail "compare table"; }
"$bin" fl --config "$tmp/sc.json" --data-dir "$data" --rounds 1 --scheme ring --train-limit 600 --test-limit 200 \
  >"$tmp/fl.txt" 2>&1 || { cat "$tmp/fl.txt"; fail "fl --config with tle"; }
grep -q "final_acc=" "$tmp/fl.txt" || { cat "$tmp/fl.txt"; fail "fl summary"; }

# Bad input: an error naming the file and line, exit status 1, no crash.
{ head -2 "$tle"; head -3 "$tle" | tail -1 | sed 's/^2 \(.....\) ...../2 \1 9x.00/'; } >"$tmp/bad.tle"
if "$bin" propagate --tle "$tmp/bad.tle" --minutes 1 >"$tmp/bad.out" 2>&1; then fail "a corrupted TLE was accepted"; fi
grep -q "bad.tle:3" "$tmp/bad.out" || { cat "$tmp/bad.out"; fail "the error does not name the file and line"; }
if "$bin" windows --tle "$tmp/none.tle" --station 1,2 >"$tmp/none.out" 2>&1; then fail "a missing file was accepted"; fi
grep -q "none.tle" "$tmp/none.out" || { cat "$tmp/none.out"; fail "the error does not name the missing file"; }
if "$bin" windows --tle "$tle" --station meo >"$tmp/st.out" 2>&1; then fail "--station meo was accepted"; fi
echo "orbit_tle_cli: propagate, windows (--start, JSON), compare and fl on $nsat satellites: ok"
