#!/usr/bin/env bash
# Two "hosts" on one machine: network namespaces joined by a veth pair in 198.18.0.0/15 (the range
# reserved for benchmarks), the link shaped with tc (rate and delay), two DiComm ranks in each. The
# ranks must see separate nodes, choose tcp;ofi_rxm on their veth by themselves, use the node
# transport inside each host, and pass every collective check across the shaped link. Skips
# (exit 77) where namespaces cannot be created.
# Usage: two_hosts.sh RANK_PROGRAM
set -uo pipefail
program=$1
suffix=$$
a=h2a-$suffix b=h2b-$suffix

cleanup() {
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
}
trap cleanup EXIT

if ! ip netns add "$a" 2>/dev/null; then
  echo "SKIP: cannot create network namespaces here (needs root and CONFIG_NET_NS)"
  exit 77
fi
ip netns add "$b" || exit 1
ip link add "veth-$suffix" netns "$a" type veth peer name "veth-$suffix" netns "$b" || { echo "SKIP: no veth"; exit 77; }
for ns in "$a" "$b"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "veth-$suffix" up
done
ip -n "$a" addr add 198.18.0.1/24 dev "veth-$suffix"
ip -n "$b" addr add 198.18.0.2/24 dev "veth-$suffix"
# A slow inter-host link: 1 Gbit/s with 1 ms each way (netem); where the kernel lacks netem, a token
# bucket still limits the rate (this VM's kernel has tbf but not netem).
for ns in "$a" "$b"; do
  tc -n "$ns" qdisc add dev "veth-$suffix" root netem delay 1ms rate 1gbit 2>/dev/null ||
    tc -n "$ns" qdisc add dev "veth-$suffix" root tbf rate 1gbit burst 256kb latency 50ms 2>/dev/null ||
    echo "note: tc cannot shape the link here; it runs at veth speed"
done
tc -n "$a" qdisc show dev "veth-$suffix"

port=$((20000 + suffix % 20000))
# Two ranks on each host: inside a host they use the node transport, between hosts tcp.
common=(H2_WORLD_SIZE=4 H2_LOCAL_WORLD_SIZE=2 H2_MASTER_ADDR=198.18.0.1 H2_MASTER_PORT=$port
        H2_JOB_TOKEN=two-hosts-$suffix H2_DICOMM_TIMEOUT=120)
pids=()
for rank in 0 1 2 3; do
  ns=$a
  [ $rank -ge 2 ] && ns=$b
  timeout 300 ip netns exec "$ns" env "${common[@]}" H2_RANK=$rank H2_LOCAL_RANK=$((rank % 2)) "$program" check \
    > "/tmp/h2-two-hosts-$suffix.$rank" 2>&1 &
  pids+=($!)
done
codes=()
for pid in "${pids[@]}"; do
  wait "$pid"
  codes+=($?)
done
output=$(cat /tmp/h2-two-hosts-$suffix.*)
echo "$output"
rm -f /tmp/h2-two-hosts-$suffix.*
if [ "${codes[*]}" != "0 0 0 0" ]; then
  echo "FAILED: the ranks exited ${codes[*]}"
  exit 1
fi
# Separate network namespaces are separate nodes: shared memory is out, the ranks pick tcp on the
# veth, and each talks to the other rank of its host through the node transport.
for expected in "rank 0: device cpu-reference:0, provider tcp;ofi_rxm, transport tcp;ofi_rxm on veth-$suffix; node transport (mapped device memory, else cma) to ranks 1" \
                "rank 3: device cpu-reference:0, provider tcp;ofi_rxm, transport tcp;ofi_rxm on veth-$suffix; node transport (mapped device memory, else cma) to ranks 2"; do
  if ! grep -qF "$expected" <<<"$output"; then
    echo "FAILED: no line '$expected'"
    exit 1
  fi
done
exit 0
