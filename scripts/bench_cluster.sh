#!/usr/bin/env bash
# zen on a cluster of network namespaces (scripts/cluster.sh): the Brown-corpus embedding trace
# (B = 256 sentences per rank, D = 64, row-level; the first n ranks' records) on n hosts, one rank
# per host, every scheme and the raw MPI baselines in the same zen_perf runs, dense and sparse output,
# at each link rate. Writes under OUT (default bench-out/cluster):
#   <rate>-h<n>-<output>.txt     zen_perf output (and .json)
#   results.md                   time per scheme, wire bytes, achieved fraction of the link-rate bound,
#                                speedups against mpi_allreduce / allgather
#   cluster.png (+ .gp, plot/)   time versus hosts per scheme (one panel per rate and output)
#   calib-<rate>-h4.txt (.json)  the cost model's alpha/beta and compute per row calibrated on 4 hosts
#                                (zen_model --calibrate --save), at the first rate; calib-<rate>-h4-<output>
#                                the same with compute per row fitted on the 4-host trace run
#   predict-<rate>-h<n>-<output>.txt   every run at that rate predicted from the 4-host calibration
#                                (zen_model --predict), also in results.md ("model vs measured")
#   usage: scripts/bench_cluster.sh [OUT] [ITERS]    env: ZEN_BENCH_HOSTS="2 4 8" ZEN_BENCH_RATES="1gbit 10gbit"
#   (hosts up to 16: above 8 the trace has 16 ranks' records)
#
# The link-rate bound of a scheme is the time its busiest rank needs to push its wire bytes through
# its link at the line rate: max(sent_B, recv_B) * 8 / rate (each host's link is shaped in both
# directions; protocol headers are not counted, so 100 % is out of reach).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/cluster}
iters=${2:-20}
hosts=${ZEN_BENCH_HOSTS:-2 4 8}
rates=${ZEN_BENCH_RATES:-1gbit 10gbit}
source scripts/env.sh
mkdir -p "$out"
text=$(bash scripts/fetch_corpus.sh)
maxh=$(echo $hosts | tr ' ' '\n' | sort -n | tail -n 1)
tr_ranks=8
(( maxh > 8 )) && tr_ranks=16
brown=data/traces/brown-n$tr_ranks-row
[ -s "$brown/trace.json" ] || build/bin/zen_trace corpus --text "$text" -o "$brown" -n $tr_ranks -B 256 -D 64 -T 4 --row-level >/dev/null
trap 'bash scripts/cluster.sh down >/dev/null 2>&1' EXIT

for rate in $rates; do
  for h in $hosts; do
    bash scripts/cluster.sh up "$h" --rate "$rate"
    for output in dense sparse; do
      f="$out/$rate-h$h-$output"
      echo "== $rate, $h hosts, $output output"
      bash scripts/cluster.sh run -- build/bin/zen_perf --trace "$brown" --scheme all --output "$output" \
        -n "$iters" -w 3 -c 1 --json "$f.json" >"$f.txt" 2>&1 || { cat "$f.txt"; exit 1; }
      grep -E "^ +[0-9]|total #wrong|auto ran" "$f.txt"
    done
  done
done
# The cost model's alpha and beta calibrated on this cluster (4 hosts at the first rate).
cal_rate=$(echo $rates | awk '{print $1}')
bash scripts/cluster.sh up 4 --rate "$cal_rate"
bash scripts/cluster.sh run -- build/bin/zen_perf --scheme mpi_allreduce,mpi_allgatherv,dense_native,balanced,allgather,sparse_ps \
  -b 256K -e 16M -f 4 -d 0.01 --overlap 2 -c 0 -w 2 -n 8 --json "$out/calib-$cal_rate-h4-perf.json" >"$out/calib-$cal_rate-h4-perf.txt" 2>&1
build/bin/zen_model --calibrate "$out/calib-$cal_rate-h4-perf.json" --save "$out/calib-$cal_rate-h4.json" | tee "$out/calib-$cal_rate-h4.txt"
bash scripts/cluster.sh down >/dev/null
# Every run at that rate predicted from the 4-host calibration (bytes: the model's own). When the
# 4-host trace run exists, each scheme's compute per row is fitted on it (rows of D values, the
# trace's overlap) rather than on the synthetic sweep: calib-<rate>-h4-<output>.json.
for output in dense sparse; do
  cal="$out/calib-$cal_rate-h4.json"
  if [ -s "$out/$cal_rate-h4-$output.json" ]; then
    cal="$out/calib-$cal_rate-h4-$output.json"
    build/bin/zen_model --calibrate "$out/calib-$cal_rate-h4-perf.json" --compute-from "$out/$cal_rate-h4-$output.json" \
      --save "$cal" >"$out/calib-$cal_rate-h4-$output.txt"
  fi
  for h in $hosts; do
    build/bin/zen_model --trace "$brown" --predict "$out/$cal_rate-h$h-$output.json" --calibration "$cal" \
      >"$out/predict-$cal_rate-h$h-$output.txt"
  done
done

rate_bits() { case $1 in *gbit) echo $(( ${1%gbit} * 1000000000 )) ;; *mbit) echo $(( ${1%mbit} * 1000000 )) ;; esac; }
{
  echo "# zen on a namespace cluster: Brown trace (D = 64, N = 3,107,008 f32), one rank per host"
  echo
  echo "Command: \`scripts/bench_cluster.sh $out $iters\` ($(date -u +%Y-%m-%d), $(nproc) cores, Open MPI $(ompi_info --version 2>/dev/null | head -n1 | awk '{print $NF}') over TCP, tbf-shaped veth links)."
  echo "time: median ms per call of the slowest rank; bound: max(sent, recv) bytes of the busiest rank at line rate;"
  echo "of bound = bound / time; vs MPI_Allreduce = time(mpi_allreduce) / time."
  for rate in $rates; do
    bits=$(rate_bits "$rate")
    for output in dense sparse; do
      echo
      echo "## $rate, $output output"
      echo
      echo "| scheme |$(for h in $hosts; do printf ' %s hosts: ms | sent MB | of bound | vs MPI_Allreduce |' "$h"; done)"
      echo "|---|$(for h in $hosts; do printf -- '---:|---:|---:|---:|'; done)"
      schemes=$(grep -E "^ +[0-9]" "$out/$rate-h$(echo $hosts | awk '{print $1}')-$output.txt" | awk '{print $4}')
      for s in $schemes; do
        printf '| %s |' "$s"
        for h in $hosts; do
          awk -v s="$s" -v bits="$bits" '
            /^ +[0-9]/ { t[$4] = $6; b[$4] = ($11 > $12 ? $11 : $12); sent[$4] = $11 }
            END {
              if (!(s in t)) { printf " - | - | - | - |"; exit }
              bound = b[s] * 8 / bits * 1e6
              printf " %.1f | %.2f | %.0f %% | %.1fx |", t[s] / 1000, sent[s] / 1e6, 100 * bound / t[s], t["mpi_allreduce"] / t[s]
            }' "$out/$rate-h$h-$output.txt"
        done
        echo
      done
    done
  done
  echo
  echo "## model vs measured ($cal_rate; calibrated on 4 hosts: alpha and beta on calib-$cal_rate-h4.txt's sweep, compute per row"
  echo "on the 4-host trace run of the same output where it ran: calib-$cal_rate-h4-<output>.txt)"
  echo
  echo "model = alpha x rounds + beta x bytes of the busiest rank (the model's exact bytes; measured for the raw MPI"
  echo "baselines) + compute per row x rows touched (zen_model --predict); error = model / measured - 1."
  echo
  echo "| hosts | output | scheme | measured ms | model ms | alpha ms | beta ms | compute ms | error |"
  echo "|---:|---|---|---:|---:|---:|---:|---:|---:|"
  for h in $hosts; do
    for output in dense sparse; do
      awk -v h="$h" -v o="$output" '/^ +[a-z_]+ +(model|measured) / {
        printf "| %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %s |\n", h, o, $1, $8 / 1000, $7 / 1000, $4 / 1000, $5 / 1000, $6 / 1000, $9 }' \
        "$out/predict-$cal_rate-h$h-$output.txt"
    done
  done
} >"$out/results.md"
cat "$out/results.md"

# Plot: time versus hosts, one line per scheme, one panel per (rate, output).
mkdir -p "$out/plot"
first=$(echo $rates | awk '{print $1}')-h$(echo $hosts | awk '{print $1}')-dense
schemes=$(grep -E "^ +[0-9]" "$out/$first.txt" | awk '{print $4}')
for rate in $rates; do
  for output in dense sparse; do
    for s in $schemes; do
      for h in $hosts; do
        awk -v h="$h" -v s="$s" '/^ +[0-9]/ && $4 == s { printf "%s %.3f\n", h, $6 / 1000 }' "$out/$rate-h$h-$output.txt"
      done >"$out/plot/$rate-$output-$s.dat"
    done
  done
done
if command -v gnuplot >/dev/null; then
  {
    echo "set terminal pngcairo size 1400,1000 font ',10'"
    echo "set output '$out/cluster.png'"
    echo "set multiplot layout 2,2 title 'zen on a namespace cluster: Brown trace, D = 64, one rank per host'"
    echo "set termoption noenhanced"
    k=1
    for c in '#1f77b4' '#ff7f0e' '#2ca02c' '#d62728' '#9467bd' '#8c564b' '#e377c2' '#7f7f7f' '#bcbd22' '#17becf' '#000000' '#aec7e8'; do
      echo "set linetype $k lc rgb '$c' lw 1.5 pt $k"
      k=$((k + 1))
    done
    echo "set logscale y; set xlabel 'hosts'; set ylabel 'median ms per call'; set key outside right; set grid"
    echo "set xtics ($(echo $hosts | sed 's/ /, /g'))"
    for rate in $rates; do
      for output in dense sparse; do
        echo "set title '$rate links, $output output'"
        plot="plot"
        k=1
        for s in $schemes; do
          plot="$plot '$out/plot/$rate-$output-$s.dat' using 1:2 with linespoints lt $k title '$s',"
          k=$((k + 1))
        done
        echo "${plot%,}"
      done
    done
    echo "unset multiplot"
  } >"$out/cluster.gp"
  gnuplot "$out/cluster.gp" && echo "wrote $out/cluster.png"
else
  echo "gnuplot not found: no plot (apt-get install gnuplot-nox)"
fi
