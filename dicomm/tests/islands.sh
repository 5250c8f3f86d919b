#!/usr/bin/env bash
# Two islands on one machine: four "hosts" (network namespaces) a1 a2 | b1 b2, each island joined by a
# fast network of its own, every host also on a slow backbone between the islands, all through
# bridges in a switch namespace and shaped with tc. One DiComm rank per host (0 a1, 1 a2, 2 b1, 3 b2).
# The rendezvous store is reached over the backbone. veth reports 10 Gbit/s whatever tc makes of it,
# so the ranks are told the speeds with H2_DICOMM_NIC_GBPS, as on a cluster whose drivers misreport.
#
#   islands.sh check COLLECTIVES_RANK   the test: each pair's network (fast inside an island, the
#                                       backbone between), every collective check across both;
#                                       without the speeds everything goes over the backbone; ranks
#                                       numbered across the islands (and three of them) run large
#                                       collectives island by island.
#   islands.sh bench H2                 allreduce busbw with routes per link against everything on
#                                       the slow backbone, ring and halving-doubling; then, ranks
#                                       numbered across the islands, the hierarchy over the islands
#                                       against the flat algorithms, for allreduce, reduce-scatter,
#                                       allgather and broadcast; ratios printed.
# Skips (exit 77) where namespaces cannot be created.
set -uo pipefail
mode=$1
program=$2
suffix=$$
sw=h2sw-$suffix
hosts=(a1 a2 b1 b2)
fast_rate=${H2_ISLANDS_FAST:-4gbit}
slow_rate=${H2_ISLANDS_SLOW:-400mbit}

ns() { echo "h2$1-$suffix"; }
# A tc rate ("4gbit", "400mbit") in Gbit/s.
gbps() { awk -v r="$1" 'BEGIN { n = r + 0; if (r ~ /gbit$/) print n; else if (r ~ /mbit$/) print n / 1000; else print n / 1e9 }'; }
cleanup() {
  for h in "${hosts[@]}"; do ip netns del "$(ns "$h")" 2>/dev/null; done
  ip netns del "$sw" 2>/dev/null
  rm -f /tmp/h2-islands-$suffix.*
}
trap cleanup EXIT

if ! ip netns add "$sw" 2>/dev/null; then
  echo "SKIP: cannot create network namespaces here (needs root and CONFIG_NET_NS)"
  exit 77
fi
for bridge in brA brB brS; do
  ip -n "$sw" link add "$bridge" type bridge || { echo "SKIP: no bridge devices"; exit 77; }
  ip -n "$sw" link set "$bridge" up
done

# Shape egress on both ends of a host's link, so that both directions are limited: netem with a
# delay where the kernel has it, else a token bucket (this VM's kernel has tbf but not netem) whose
# bucket holds 10 ms at the rate: a smaller one caps the rate at bucket x timer ticks per second.
shape() {  # namespace interface rate delay
  local burst
  burst=$(awk -v r="$(gbps "$3")" 'BEGIN { b = r * 1e9 / 8 / 100; if (b < 262144) b = 262144; printf "%d", b }')
  tc -n "$1" qdisc add dev "$2" root netem delay "$4" rate "$3" 2>/dev/null ||
    tc -n "$1" qdisc add dev "$2" root tbf rate "$3" burst "$burst" latency 50ms 2>/dev/null ||
    echo "note: tc cannot shape $2 here; it runs at veth speed"
}

index=0
for h in "${hosts[@]}"; do
  index=$((index + 1))
  host=$(ns "$h")
  ip netns add "$host" || exit 1
  ip -n "$host" link set lo up
  island=${h:0:1}
  ip link add fast0 netns "$host" type veth peer name "${h}f" netns "$sw" || { echo "SKIP: no veth"; exit 77; }
  ip link add slow0 netns "$host" type veth peer name "${h}s" netns "$sw" || exit 1
  ip -n "$sw" link set "${h}f" master "br${island^^}" up
  ip -n "$sw" link set "${h}s" master brS up
  ip -n "$host" link set fast0 up
  ip -n "$host" link set slow0 up
  subnet=1
  [ "$island" = b ] && subnet=2
  ip -n "$host" addr add "198.18.$subnet.${h:1:1}/24" dev fast0
  ip -n "$host" addr add "198.18.9.$index/24" dev slow0
  shape "$host" fast0 "$fast_rate" 50us
  shape "$sw" "${h}f" "$fast_rate" 50us
  shape "$host" slow0 "$slow_rate" 1ms
  shape "$sw" "${h}s" "$slow_rate" 1ms
done
echo "islands: a1 a2 on 198.18.1.0/24, b1 b2 on 198.18.2.0/24 ($fast_rate); backbone 198.18.9.0/24 ($slow_rate)"

# Runs `$@` on a rank per host of `order` (rank r on host order[r]; rank 0 on a1, whose backbone
# address serves the store) with the environment in `extra` (an array); returns non-zero when a
# rank failed. Each rank's output goes to /tmp/h2-islands-$suffix.RANK.
port=$((20000 + suffix % 20000))
order=(a1 a2 b1 b2)
run_ranks() {
  port=$((port + 1))
  local pids=() codes=() rank
  for rank in "${!order[@]}"; do
    timeout 300 ip netns exec "$(ns "${order[$rank]}")" env H2_WORLD_SIZE=${#order[@]} H2_LOCAL_WORLD_SIZE=1 H2_LOCAL_RANK=0 \
      H2_MASTER_ADDR=198.18.9.1 H2_MASTER_PORT=$port H2_JOB_TOKEN=islands-$suffix-$port H2_DICOMM_TIMEOUT=120 \
      H2_RANK=$rank "${extra[@]}" "$@" > "/tmp/h2-islands-$suffix.$rank" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid"
    codes+=($?)
  done
  [ -z "$(echo "${codes[*]}" | tr -d ' 0')" ] || { cat /tmp/h2-islands-$suffix.*; echo "FAILED: the ranks exited ${codes[*]}"; return 1; }
}

expect() {  # text: a whole line some rank of the last run printed
  if ! grep -qxF "$1" /tmp/h2-islands-$suffix.*; then
    cat /tmp/h2-islands-$suffix.*
    echo "FAILED: no line '$1'"
    exit 1
  fi
}

speeds=(H2_DICOMM_NIC_GBPS="fast0=$(gbps "$fast_rate"),slow0=$(gbps "$slow_rate")")
if [ "$mode" = check ]; then
  extra=("${speeds[@]}")
  run_ranks "$program" check || exit 1
  cat /tmp/h2-islands-$suffix.0
  expect "rank 0: device cpu-reference:0, provider tcp;ofi_rxm, transport tcp;ofi_rxm on fast0 to ranks 1; tcp;ofi_rxm on slow0 to ranks 2,3"
  expect "rank 3: device cpu-reference:0, provider tcp;ofi_rxm, transport tcp;ofi_rxm on slow0 to ranks 0,1; tcp;ofi_rxm on fast0 to ranks 2"
  # Networks alike but for the store's: the one every rank reaches the store through.
  extra=()
  run_ranks "$program" check || exit 1
  expect "rank 0: device cpu-reference:0, provider tcp;ofi_rxm, transport tcp;ofi_rxm on slow0"
  expect "rank 3: device cpu-reference:0, provider tcp;ofi_rxm, transport tcp;ofi_rxm on slow0"
  # A speed nobody can parse is refused by name before anything is sent.
  extra=(H2_DICOMM_NIC_GBPS=fast0=quick)
  if run_ranks "$program" check > /dev/null; then echo "FAILED: H2_DICOMM_NIC_GBPS=fast0=quick was accepted"; exit 1; fi
  grep -qF "H2_DICOMM_NIC_GBPS entry 'fast0=quick' is not NIC=GBITS_PER_S" /tmp/h2-islands-$suffix.* || { echo "FAILED: the bad speed was not named"; exit 1; }
  # Numbered island by island (a1 a2 b1 b2), large allreduces run by halving and doubling, which
  # sums island by island already, and the other large collectives island by island (blocks
  # reordered: the ranks are not numbered place by place). Numbered across the islands (a1 b1 a2
  # b2), where halving-doubling's nearest partner is across the backbone, every large collective
  # runs island by island. Three ranks make islands of two sizes, whose allreduces sum piece by
  # piece when asked to (H2_DICOMM_ALLREDUCE=hierarchical); their reduce-scatters and allgathers
  # exchange slices of the other island's blocks.
  for hosts_in_order in "a1 a2 b1 b2" "a1 b1 a2 b2" "a1 b1 a2"; do
    read -ra order <<< "$hosts_in_order"
    extra=("${speeds[@]}" H2_LOG_LEVEL=info)
    [ ${#order[@]} = 3 ] && extra+=(H2_DICOMM_ALLREDUCE=hierarchical)
    run_ranks "$program" check || exit 1
    case "$hosts_in_order" in
      "a1 a2 b1 b2")
        want="large reduce-scatters, allgathers and broadcasts hierarchical over islands {0,1} {2,3} (shard by shard between them; allreduces by halving and doubling, which follows them)"
        kinds="reduce_scatter allgather broadcast" ;;
      "a1 b1 a2 b2")
        want="large collectives hierarchical over islands {0,2} {1,3} (shard by shard between them)"
        kinds="allreduce reduce_scatter allgather broadcast" ;;
      *)
        want="large collectives hierarchical over islands {0,2} {1} (piece by piece between them)"
        kinds="allreduce reduce_scatter allgather broadcast" ;;
    esac
    grep -qF "$want" /tmp/h2-islands-$suffix.0 || { cat /tmp/h2-islands-$suffix.0; echo "FAILED: ranks $hosts_in_order: no '$want'"; exit 1; }
    for kind in $kinds; do
      grep -qF "communicator 'world': first hierarchical $kind" /tmp/h2-islands-$suffix.0 ||
        { cat /tmp/h2-islands-$suffix.0; echo "FAILED: ranks $hosts_in_order: no hierarchical $kind"; exit 1; }
    done
    echo "ranks on $hosts_in_order: $want; hierarchical: $kinds; every collective right"
  done
  order=(a1 a2 b1 b2)
  echo "islands: every pair on its network, every collective right"
  exit 0
fi

if [ "$mode" != bench ]; then echo "usage: islands.sh check|bench PROGRAM"; exit 2; fi
# measure KEY OP MIN: h2 bench comm of OP from MIN to 4 MiB on the ranks in `order` with `extra`,
# each size's busbw (GB/s) into busbw[KEY,BYTES], and the sizes it ran into `sizes` (on 3 ranks a
# reduce-scatter's or allgather's sizes are multiples of 3 bytes' elements, not powers of two).
measure() {
  local key=$1 op=$2 min=$3 json=/tmp/h2-islands-$suffix.json bytes value
  run_ranks "$program" bench comm --op "$op" --min-bytes "$min" --max-bytes 4M --factor 4 --iters 6 --warmup 2 \
    --json "$json" || exit 1
  sizes=()
  while read -r bytes value; do busbw[$key,$bytes]=$value; sizes+=("$bytes"); done < <(
    python3 -c 'import json,sys
for line in open(sys.argv[1]): row = json.loads(line); print(row["bytes"], row["busbw_gbps"])' "$json")
}
# hierarchical_against_flat TITLE KEY_H KEY_F: a table of the last measured sizes, hierarchical
# (busbw[KEY_H,BYTES]) against flat (busbw[KEY_F,BYTES]) and their ratio.
hierarchical_against_flat() {
  echo
  echo "$1"
  printf "%10s | %12s %12s | %12s\n" bytes hierarchical flat "hier / flat"
  local bytes
  for bytes in "${sizes[@]}"; do
    python3 -c 'import sys
b = sys.argv[1]; h, f = map(float, sys.argv[2:])
print("%10s | %12.3f %12.3f | %11.2fx" % (b, h, f, h / f if f else 0))' \
      "$bytes" "${busbw[$2,$bytes]:-0}" "${busbw[$3,$bytes]:-0}"
  done
}
# busbw (GB/s) per size for one setting: routes per link or everything on the backbone, one algorithm.
declare -A busbw
for algorithm in halving_doubling ring; do
  for routes in per-link backbone; do
    extra=(H2_DICOMM_ALLREDUCE=$algorithm)
    [ "$routes" = per-link ] && extra+=("${speeds[@]}")
    measure "$algorithm,$routes" allreduce 64K
    head -3 /tmp/h2-islands-$suffix.0 | sed "s/^/  [$algorithm, $routes] /"
  done
done
echo
echo "allreduce on two islands, 4 ranks, f32 sum: busbw GB/s, routes per link against all on the slow backbone"
printf "%10s | %-38s | %-38s\n" "" "halving-doubling" "ring"
printf "%10s | %12s %12s %10s | %12s %12s %10s\n" bytes per-link backbone ratio per-link backbone ratio
for bytes in 65536 262144 1048576 4194304; do
  line=$(printf "%10s |" "$bytes")
  for algorithm in halving_doubling ring; do
    a=${busbw[$algorithm,per-link,$bytes]:-0} b=${busbw[$algorithm,backbone,$bytes]:-0}
    line+=$(python3 -c 'import sys; a, b = map(float, sys.argv[1:]); print(" %12.3f %12.3f %9.2fx |" % (a, b, a / b if b else 0))' "$a" "$b")
  done
  echo "${line%|}"
done

# Ranks numbered across the islands (a1 b1 a2 b2), routes per link: the hierarchy over the islands
# (auto) against the flat algorithms, whose large steps now cross the backbone.
order=(a1 b1 a2 b2)
for algorithm in auto halving_doubling ring; do
  extra=(H2_DICOMM_ALLREDUCE=$algorithm "${speeds[@]}")
  measure "across,$algorithm" allreduce 64K
done
echo
echo "allreduce, 4 ranks numbered across the islands (a1 b1 a2 b2), routes per link, f32 sum: busbw GB/s"
printf "%10s | %12s %12s %12s | %16s %10s\n" bytes hierarchical halving-dbl ring "hier / halv-dbl" "hier / ring"
for bytes in 65536 262144 1048576 4194304; do
  python3 -c 'import sys
b = sys.argv[1]; h, d, r = map(float, sys.argv[2:])
print("%10s | %12.3f %12.3f %12.3f | %15.2fx %9.2fx" % (b, h, d, r, h / d if d else 0, h / r if r else 0))' \
    "$bytes" "${busbw[across,auto,$bytes]:-0}" "${busbw[across,halving_doubling,$bytes]:-0}" "${busbw[across,ring,$bytes]:-0}"
done

# The other collectives, ranks numbered across the islands and island by island: island by island
# (auto, above H2_DICOMM_SMALL_BYTES, 64 KiB: so from 256 KiB) against flat (ring: no islands),
# whose ring crosses the backbone at every step (across) or twice a round (island by island).
for numbering in "a1 b1 a2 b2" "a1 a2 b1 b2"; do
  read -ra order <<< "$numbering"
  for op in reduce_scatter allgather broadcast; do
    for algorithm in auto ring; do
      extra=(H2_DICOMM_ALLREDUCE=$algorithm "${speeds[@]}")
      measure "$numbering,$op,$algorithm" $op 256K
    done
    hierarchical_against_flat "$op, 4 ranks numbered $numbering, routes per link, f32: busbw GB/s" \
      "$numbering,$op,auto" "$numbering,$op,ring"
  done
done

# Islands of two sizes: three ranks (a1 b1 a2), islands {a1, a2} and {b1}. Reduce-scatter and
# allgather exchange slices of the other island's blocks (H2_DICOMM_ALLREDUCE=hierarchical: unasked,
# islands of several sizes run flat) against the flat ring.
order=(a1 b1 a2)
for op in reduce_scatter allgather; do
  for algorithm in hierarchical ring; do
    extra=(H2_DICOMM_ALLREDUCE=$algorithm "${speeds[@]}")
    measure "sizes,$op,$algorithm" $op 256K
  done
  hierarchical_against_flat "$op, 3 ranks on islands of 2 and 1 (a1 b1 a2), routes per link, f32: busbw GB/s" \
    "sizes,$op,hierarchical" "sizes,$op,ring"
done
